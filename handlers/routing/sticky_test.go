package routing

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/routestats"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// stickyRouter routes "duo", served by three equally priced providers,
// drawing load balancing's choices from draws in turn.
func stickyRouter(t *testing.T, draws ...float64) (*Router, *testgw.Gateway) {
	prov := func(name string) *catalog.Provider {
		p := testgw.Provider(name, "http", name+".test", name+".test:80", "/v1", name+"-model", "k-"+name)
		p.Stats = new(routestats.Stats)
		return p
	}
	duo := testgw.PricedModel("duo", testgw.Pricing, prov("p1"), prov("p2"), prov("p3"))
	rt := newRoutingRouter(t, catalog.New([]*catalog.Model{duo}))
	i := 0
	rt.Random = func() float64 { i++; return draws[i%len(draws)] }
	return rt, rt.Gateway.(*testgw.Gateway)
}

// stickyTurn routes one chat request of the conversation whose first
// user message is first, and has its first attempt answer it; it returns
// the attempts' providers in order.
func stickyTurn(t *testing.T, rt *Router, gw *testgw.Gateway, id *gateway.Identity, first, members string) string {
	t.Helper()
	body := `{"model":"duo","messages":[{"role":"system","content":"S"},{"role":"user","content":"` + first + `"}]` + members + `}`
	st := &pipeline.State{API: chatRoute, ID: id, Store: gw.Storage}
	f, apiErr := ValidateInference(dialect.Chat, []byte(body))
	if apiErr == nil {
		st.Sticky.SessionID, _ = f.String("session_id")
	}
	r, apiErr := rt.Route(st, []byte(body), f)
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	st.Sticky.Served(r.Attempts[0].Model.ID, r.Attempts[0].Provider.Name)
	var out []string
	for _, a := range r.Attempts {
		out = append(out, a.Provider.Name)
	}
	return strings.Join(out, ",")
}

func TestStickyRouting(t *testing.T) {
	// Each draw picks another first endpoint: without stickiness the
	// turns would spread.
	rt, gw := stickyRouter(t, 0.1, 0.5, 0.9)
	acct := gw.Account(t, storage.AccountOrganization)
	key, _ := gw.APIKey(t, acct, storage.NewAPIKey{})
	id := &gateway.Identity{Principal: storage.Principal{AccountID: acct.ID, Hash: key.Hash, Key: &key}, Account: &acct}

	first := strings.Split(stickyTurn(t, rt, gw, id, "conversation A", ""), ",")[0]
	for turn := range 6 {
		if got := stickyTurn(t, rt, gw, id, "conversation A", ""); !strings.HasPrefix(got, first+",") {
			t.Fatalf("turn %d went to %s, want %s first", turn+2, got, first)
		}
	}
	// Explicit order and sort win over stickiness.
	if got := stickyTurn(t, rt, gw, id, "conversation A", `,"provider":{"order":["p3","p2","p1"]}`); got != "p3,p2,p1" {
		t.Fatalf("with provider.order: %s", got)
	}
	// A filter that leaves only one endpoint: nothing to choose, and the
	// conversation keeps its endpoint.
	other := map[string]string{"p1": "p2", "p2": "p3", "p3": "p1"}[first]
	third := map[string]string{"p1": "p3", "p2": "p1", "p3": "p2"}[first]
	if got := stickyTurn(t, rt, gw, id, "conversation A", `,"provider":{"only":["`+other+`"]}`); got != other {
		t.Fatalf("only %s: %s", other, got)
	}
	if got := stickyTurn(t, rt, gw, id, "conversation A", ""); !strings.HasPrefix(got, first+",") {
		t.Fatalf("after a one-endpoint turn: %s, want %s first", got, first)
	}
	// A filter that leaves the endpoint out but several others: they are
	// load balanced, and the conversation sticks to the one that served.
	served := strings.Split(stickyTurn(t, rt, gw, id, "conversation A", `,"provider":{"ignore":["`+first+`"]}`), ",")[0]
	if served != other && served != third {
		t.Fatalf("ignore %s: served by %s", first, served)
	}
	if got := stickyTurn(t, rt, gw, id, "conversation A", ""); !strings.HasPrefix(got, served+",") {
		t.Fatalf("after the filtered turn: %s, want %s first", got, served)
	}

	// Sessions: two conversations with one session id share it; the
	// derived key of another conversation is its own.
	s := strings.Split(stickyTurn(t, rt, gw, id, "conversation B", `,"session_id":"sess-1"`), ",")[0]
	for i := range 5 {
		if got := stickyTurn(t, rt, gw, id, "conversation C"+strings.Repeat("!", i), `,"session_id":"sess-1"`); !strings.HasPrefix(got, s+",") {
			t.Fatalf("session turn %d: %s, want %s first", i, got, s)
		}
	}

	// Off: load balancing alone.
	rt.StickyIdle = -1
	seen := map[string]bool{}
	for range 6 {
		seen[strings.Split(stickyTurn(t, rt, gw, id, "conversation A", ""), ",")[0]] = true
	}
	if len(seen) < 2 {
		t.Fatalf("sticky_idle off still stuck: %v", seen)
	}
}
