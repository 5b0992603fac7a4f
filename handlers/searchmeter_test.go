package handlers

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/websearch"
	"github.com/tollgate-dev/caddy-tollgate/handlers/routing"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/standin/enginestest"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// searchGateway is a gateway that offers web search with settings s.
type searchGateway struct {
	gateway.Gateway
	s *websearch.Settings
}

// WebSearchSettings implements websearch.Provider.
func (g searchGateway) WebSearchSettings() *websearch.Settings { return g.s }

// TestMeterChargesSearchOnce runs Auth → web search → Router → Meter with
// the exa engine on the engines' test double: the search runs once, after
// admission, its results reach the provider, and the charge (tokens plus
// results at the engine's price) lands once with the generation record.
func TestMeterChargesSearchOnce(t *testing.T) {
	ts := enginestest.StartTestServer()
	defer ts.Close()
	f := newMeterFixture(t, "10", storage.NewAPIKey{Name: "k"})
	exa, _ := json.Marshal(websearch.EngineConfig{BaseURL: ts.URL, PricePerResult: "0.003"})
	s, err := (&websearch.Config{DefaultEngine: "exa", EnginesRaw: caddy.ModuleMap{"exa": exa}}).Build(caddy.NewReplacer(), ts.Client())
	if err != nil {
		t.Fatal(err)
	}
	ws := searchMW{websearch.New(searchGateway{f.gw, s})}
	router := &routing.Router{Gateway: f.gw}
	if err := router.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	f.provider = func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		_, err := io.WriteString(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"see [a](https://x.example/1)"},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":10,"total_tokens":110}}`)
		return err
	}
	up := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		f.calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		f.bodies = append(f.bodies, string(body))
		return f.provider(w, r)
	})
	h := handlerOf(&Auth{gw: f.gw, logger: zap.NewNop()}, handlerOf(ws, handlerOf(routerMW{router}, handlerOf(newMeterMW(f.gw), up))))
	r, repl := testgw.NewRequest("POST", "/api/v1/chat/completions", `{"model":"m:online","messages":[{"role":"user","content":"find"}]}`, "Authorization", "Bearer "+f.key)
	res := testgw.Serve(t, h, r, repl)
	res.Must(t, 200)
	if n := len(ts.Requests()); n != 1 || f.calls.Load() != 1 || !strings.Contains(f.bodies[0], "A web search was run on") {
		t.Fatalf("%d searches, %d calls, bodies %q", n, f.calls.Load(), f.bodies)
	}
	// 100 × 0.000001 + 10 × 0.000002 + 5 results × 0.003
	want := money.Amount(100_000 + 20_000 + 15_000_000)
	f.wantCharged(t, want)
	g, err := f.store().Generation(res.Header.Get("X-Generation-Id"))
	if err != nil || g.SearchResults != 5 || g.Cost != want {
		t.Fatalf("generation %+v %v", g, err)
	}
	if res.Header.Get("Deprecation") != "true" || gjson.Get(res.Body, "usage.server_tool_use_details.web_search_results").Int() != 5 {
		t.Fatalf("answer %s %v", res.Body, res.Header)
	}
}
