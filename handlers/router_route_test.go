package handlers

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/routing"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// routed is what the handler after the router saw.
type routed struct {
	host, auth, contentLength string
	body                      []byte
	length                    int64
	route                     *upstream.Route
	hasRoute                  bool
}

// routeRecorder records the request the router passed on; 418.
func routeRecorder(t *testing.T, got **routed) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		r = asSent(r)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("reading body: %v", err)
		}
		rec := &routed{host: r.Host, auth: r.Header.Get("Authorization"), contentLength: r.Header.Get("Content-Length"),
			body: body, length: r.ContentLength}
		rec.route, rec.hasRoute = RouteFrom(r)
		*got = rec
		w.WriteHeader(http.StatusTeapot)
		return nil
	})
}

// newRoutingRouter is a provisioned Router over a gateway with cat.
func newRoutingRouter(t *testing.T, cat *catalog.Catalog) *routing.Router {
	t.Helper()
	gw := testgw.New(t)
	gw.ModelCatalog = cat
	rt := &routing.Router{Gateway: gw}
	if err := rt.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	return rt
}

func TestRouterUnknownModel(t *testing.T) {
	rt := newRoutingRouter(t, testgw.RoutedCatalog())
	for body, msg := range map[string]string{
		`{"model":"nope","messages":[]}`:                   `model: unknown model "nope"`,
		`{"models":["nope","paid"],"messages":[]}`:         `models: unknown model "nope"`,
		`{"model":"paid","models":["nope"],"messages":[]}`: `models: unknown model "nope"`,
	} {
		var got *routed
		r, repl := testgw.NewRequest("POST", "/api/v1/chat/completions", body)
		testgw.Serve(t, handlerOf(routerMW{rt}, routeRecorder(t, &got)), r, repl).WantError(t, 400, msg)
		if got != nil {
			t.Error("unknown model reached the upstream")
		}
		if _, ok := repl.Get("tollgate.upstream.dial"); ok {
			t.Error("dial placeholder set for a refused request")
		}
	}
	// a router outside a Caddy config has an empty catalog
	c := routerOnly(t, new(routing.Router))
	r, repl := testgw.NewRequest("POST", "/api/v1/chat/completions", `{"model":"paid","messages":[]}`)
	c.doRouter(t, r, repl).WantError(t, 400, `model: unknown model "paid"`)
}

func TestRouterNoProvider(t *testing.T) {
	rt := newRoutingRouter(t, testgw.RoutedCatalog())
	for _, id := range []string{"keyless", "bare"} {
		var got *routed
		r, repl := testgw.NewRequest("POST", "/api/v1/responses", `{"model":"`+id+`","input":"hi"}`)
		testgw.Serve(t, handlerOf(routerMW{rt}, routeRecorder(t, &got)), r, repl).WantError(t, 503, "No provider is available for model "+id)
		if got != nil {
			t.Errorf("%s reached the upstream", id)
		}
	}
}

func TestRouterRefusesBeforeRouting(t *testing.T) {
	rt := newRoutingRouter(t, testgw.RoutedCatalog())
	tests := []struct{ body, message string }{
		{`{"model":"nope"}`, "messages: expected an array of messages"},
		{`{"model":"paid","messages":[],"model":"mock"}`, "model: duplicate field"},
		{`{"model":"paid","messages":[],"stream":false,"stream":true}`, "stream: duplicate field"},
		{`{"models":[1],"messages":[]}`, "models: expected an array of model ids"},
		{`{"models":[],"messages":[]}`, "models: expected an array of model ids"},
	}
	for _, tt := range tests {
		var got *routed
		r, repl := testgw.NewRequest("POST", "/api/v1/chat/completions", tt.body)
		testgw.Serve(t, handlerOf(routerMW{rt}, routeRecorder(t, &got)), r, repl).WantError(t, 400, tt.message)
		if got != nil {
			t.Errorf("%s reached the upstream", tt.body)
		}
	}
}

func TestRouterRoutes(t *testing.T) {
	tests := []struct {
		name, target, body string
		wantBody           string // "" for unchanged
		dial, uri, host    string
		scheme, provider   string
		model              string
		key                string
		kind               string
		stream             bool
		maxTokens          int64
		user               string
	}{
		{
			name: "rewritten model", target: "/api/v1/chat/completions",
			body: "{\n  \"model\" : \"paid\",\t\"messages\":[{\"role\":\"user\",\"content\":\"h\\u00e9 日本\"}] ,\"max_tokens\":50,\"stream\":true,\"user\":\"u-1\"}\n",
			// A stream asks the provider for usage.
			wantBody: "{\n  \"model\" : \"gpt-x-2025\",\t\"messages\":[{\"role\":\"user\",\"content\":\"h\\u00e9 日本\"}] ,\"max_tokens\":50,\"stream\":true,\"user\":\"u-1\",\"stream_options\":{\"include_usage\":true}}\n",
			dial:     "api.openai.test:443", uri: "/v1/chat/completions", host: "api.openai.test", scheme: "https",
			provider: "openai", model: "paid", key: "sk-openai", kind: "chat", stream: true, maxTokens: 50, user: "u-1",
		},
		{
			name: "same model untouched", target: "/api/v1/responses/?trace=1&x=a%20b",
			body: "{ \"input\" : \"hi\", \"model\":\"mock\" ,\"max_output_tokens\": 17 , \"stream\":false}",
			dial: "127.0.0.1:8081", uri: "/v1/responses?trace=1&x=a%20b", host: "127.0.0.1:8081", scheme: "http",
			provider: "mock", model: "mock", key: "mock-key", kind: "responses", maxTokens: 17,
		},
		{
			name: "first usable provider", target: "/api/v1/completions",
			body:     `{"model":"second","prompt":"x","max_completion_tokens":9,"max_tokens":null}`,
			wantBody: `{"model":"second-up","prompt":"x","max_completion_tokens":9,"max_tokens":null}`,
			dial:     "two.test:8000", uri: "/completions", host: "two.test:8000", scheme: "http",
			provider: "fallback", model: "second", key: "key-2", kind: "other", maxTokens: 9,
		},
		{
			name: "fallback list without model", target: "/api/v1/chat/completions",
			body: `{"models":["paid","mock"],"messages":[]}`,
			// The gateway's own fields are not sent upstream.
			wantBody: `{"messages":[],"model":"gpt-x-2025"}`,
			dial:     "api.openai.test:443", uri: "/v1/chat/completions", host: "api.openai.test", scheme: "https",
			provider: "openai", model: "paid", key: "sk-openai", kind: "chat",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newRoutingRouter(t, testgw.RoutedCatalog())
			var got *routed
			r, repl := testgw.NewRequest("POST", tt.target, tt.body, "Accept-Encoding", "gzip", "Host", "gateway.test")
			r.Host = "gateway.test"
			testgw.Serve(t, handlerOf(routerMW{rt}, routeRecorder(t, &got)), r, repl).Must(t, http.StatusTeapot)
			want := tt.wantBody
			if want == "" {
				want = tt.body
			}
			if string(got.body) != want {
				t.Errorf("body = %q\nwant   %q", got.body, want)
			}
			if got.length != int64(len(want)) || got.contentLength != strconv.Itoa(len(want)) {
				t.Errorf("length %d / %q, want %d", got.length, got.contentLength, len(want))
			}
			if got.host != tt.host || got.auth != "Bearer "+tt.key {
				t.Errorf("Host %q Authorization %q", got.host, got.auth)
			}
			for name, want := range map[string]string{
				"tollgate.upstream.dial": tt.dial, "tollgate.upstream.uri": tt.uri, "tollgate.upstream.host": tt.host,
				"tollgate.upstream.scheme": tt.scheme, "tollgate.model": tt.model, "tollgate.provider": tt.provider,
			} {
				if v, _ := repl.Get(name); v != want {
					t.Errorf("%s = %v, want %q", name, v, want)
				}
			}
			rte := got.route
			if !got.hasRoute || rte.Model.ID != tt.model || rte.Provider.Name != tt.provider || string(rte.Kind) != tt.kind ||
				rte.Stream != tt.stream || rte.MaxTokens != tt.maxTokens || rte.User != tt.user || rte.BYOK ||
				rte.InputTokens != billing.EstimateTokens(len(want)) {
				t.Errorf("route = %+v", rte)
			}
		})
	}
}

func TestRouterInChainUsesProviderKey(t *testing.T) {
	f := newAuthFixture(t)
	f.c.gw.ModelCatalog = testgw.RoutedCatalog()
	f.c.router.Gateway = f.c.gw
	var got *routed
	up := routeRecorder(t, &got)
	h := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		return f.c.auth.ServeHTTP(w, r, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			return routerMW{f.c.router}.ServeHTTP(w, r, up)
		}))
	})
	r, repl := testgw.NewRequest("POST", "/api/v1/chat/completions", `{"model":"paid","messages":[]}`, "Authorization", "Bearer "+f.regular)
	testgw.Serve(t, h, r, repl).Must(t, http.StatusTeapot)
	if got.auth != "Bearer sk-openai" {
		t.Errorf("Authorization = %q, want the provider's key", got.auth)
	}
	if r.Header.Get("Authorization") != "" {
		t.Errorf("the provider's key leaked into the logged request's headers")
	}
	if v, _ := repl.Get("tollgate.key.hash"); v != f.regHash {
		t.Errorf("key hash = %v", v)
	}
	// the refusal comes after authentication: a management key is 403
	r, repl = testgw.NewRequest("POST", "/api/v1/chat/completions", `{"model":"nope","messages":[]}`, "Authorization", "Bearer "+f.mgmt)
	testgw.Serve(t, h, r, repl).WantError(t, 403, msgNoInference)
}

func TestTokenCountIsExact(t *testing.T) {
	for raw, want := range map[string]int64{
		"1": 1, "9223372036854775807": 1<<63 - 1, "1e3": 1000, "100.0": 100, "9007199254740992": 1 << 53,
		"9007199254740993.0": 9007199254740993, "1.5e3": 1500, "12300e-2": 123, "0.5e1": 5,
		"0": 0, "0.0": 0, "-1": 0, "-1e3": 0, "1.5": 0, "1.25e1": 0, "9223372036854775808": 0, "9223372036854775808.0": 0, "1e19": 0,
		"1e999999999": 0, "1e-999999999": 0, "1.0000000000000001": 0, `"5"`: 0, "null": 0,
	} {
		n, ok := routing.TokenCount(gjson.Parse(raw))
		if ok != (want != 0) || n != want && ok {
			t.Errorf("tokenCount(%s) = %d, %v; want %d", raw, n, ok, want)
		}
	}
}

// limitedCatalog: "short" answers at most 100 tokens, "window" has only a
// 1,000-token context window, "long" answers up to 100,000 tokens.
func limitedCatalog() *catalog.Catalog {
	short := testgw.Model("short", 0, testgw.Provider("p1", "http", "one.test", "one.test:80", "", "short", "k1"))
	short.MaxCompletionTokens = 100
	window := testgw.Model("window", 0, testgw.Provider("p2", "http", "two.test", "two.test:80", "", "window", "k2"))
	window.ContextLength = 1000
	long := testgw.Model("long", 0, testgw.Provider("p3", "http", "three.test", "three.test:80", "", "long", "k3"))
	long.MaxCompletionTokens = 100_000
	return catalog.New([]*catalog.Model{short, window, long})
}

// A max-tokens field above the model's output limit gets the provider's
// 400, naming the field; a fallback model that can answer serves it.
func TestRouterOutputLimit(t *testing.T) {
	rt := newRoutingRouter(t, limitedCatalog())
	for _, tt := range []struct {
		target, body string
		status       int
		want         string // error message, or the model that serves it
	}{
		{"/api/v1/chat/completions", `{"model":"short","messages":[],"max_tokens":100}`, 418, "short"},
		{"/api/v1/chat/completions", `{"model":"short","messages":[],"max_tokens":101}`, 400, "max_tokens: must be at most 100 for model short"},
		{"/api/v1/chat/completions", `{"model":"short","messages":[],"max_tokens":5,"max_completion_tokens":9007199254740991}`, 400,
			"max_completion_tokens: must be at most 100 for model short"},
		{"/api/v1/chat/completions", `{"model":"window","messages":[],"max_completion_tokens":1001}`, 400, "max_completion_tokens: must be at most 1000 for model window"},
		{"/api/v1/responses", `{"model":"window","input":"x","max_output_tokens":9007199254740991}`, 400, "max_output_tokens: must be at most 1000 for model window"},
		{"/api/v1/responses", `{"model":"window","input":"x","max_output_tokens":1000}`, 418, "window"},
		{"/api/v1/chat/completions", `{"models":["short","window","long"],"messages":[],"max_tokens":5000}`, 418, "long"},
		{"/api/v1/chat/completions", `{"models":["long","short"],"messages":[],"max_tokens":5000}`, 418, "long"},
		{"/api/v1/chat/completions", `{"models":["short","window"],"messages":[],"max_tokens":5000}`, 400, "max_tokens: must be at most 100 for model short"},
	} {
		var got *routed
		r, repl := testgw.NewRequest("POST", tt.target, tt.body)
		res := testgw.Serve(t, handlerOf(routerMW{rt}, routeRecorder(t, &got)), r, repl)
		if tt.status == 400 {
			res.WantError(t, 400, tt.want)
			if got != nil {
				t.Errorf("%s reached the upstream", tt.body)
			}
			continue
		}
		res.Must(t, tt.status)
		if got == nil || got.route.Model.ID != tt.want || len(got.route.Attempts) != 1 {
			t.Errorf("%s: routed %+v", tt.body, got)
		}
	}
}

// TestRouterEmbeddingsWithinTheProviderAPI: an embeddings request that an
// OpenAI-style provider's API refuses (more than 2048 inputs, an empty
// one) is a 400 naming input before it is routed; 2048 inputs are sent.
func TestRouterEmbeddingsWithinTheProviderAPI(t *testing.T) {
	rt := newRoutingRouter(t, testgw.RoutedCatalog())
	inputs := func(n int, s string) string {
		return `{"model":"paid","input":[` + strings.TrimSuffix(strings.Repeat(`"`+s+`",`, n), ",") + `]}`
	}
	for body, msg := range map[string]string{
		inputs(2049, "a"):             "input: at most 2048 inputs for this model's provider (OpenAI-style embeddings); 2049 sent",
		inputs(2, ""):                 "input: an empty input is refused by this model's provider (OpenAI-style embeddings)",
		`{"model":"paid","input":""}`: "input: an empty input is refused by this model's provider (OpenAI-style embeddings)",
	} {
		var got *routed
		r, repl := testgw.NewRequest("POST", "/api/v1/embeddings", body)
		testgw.Serve(t, handlerOf(routerMW{rt}, routeRecorder(t, &got)), r, repl).WantError(t, 400, msg)
		if got != nil {
			t.Errorf("%.40s... reached the upstream", body)
		}
	}
	var got *routed
	r, repl := testgw.NewRequest("POST", "/api/v1/embeddings", inputs(2048, "a"))
	testgw.Serve(t, handlerOf(routerMW{rt}, routeRecorder(t, &got)), r, repl).Must(t, http.StatusTeapot)
	if got == nil {
		t.Fatal("2048 inputs were not sent")
	}
}
