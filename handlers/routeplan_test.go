package handlers

import (
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/admin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/metering"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/handlers/routing"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// planCatalog: "two" on two providers (one an Anthropic-style one), for
// plans with a fallback and a translated attempt.
func planCatalog() *catalog.Catalog {
	a := testgw.Provider("first", "https", "one.test", "one.test:443", "/v1", "up-one", "k1")
	b := testgw.Provider("second", "http", "two.test:8000", "two.test:8000", "", "up-two", "k2")
	b.Style = "anthropic"
	return catalog.New([]*catalog.Model{testgw.Model("two", 0, a, b)})
}

// requestSnapshot is what routing must leave as it found on the client's
// request.
type requestSnapshot struct {
	header        http.Header
	url, host     string
	contentLength int64
	body          io.ReadCloser
}

func snapshot(r *http.Request) requestSnapshot {
	h := make(http.Header, len(r.Header))
	for k, v := range r.Header {
		h[k] = slices.Clone(v)
	}
	return requestSnapshot{header: h, url: r.URL.String(), host: r.Host, contentLength: r.ContentLength, body: r.Body}
}

func (s requestSnapshot) check(t *testing.T, r *http.Request, when string) {
	t.Helper()
	if !reflect.DeepEqual(r.Header, s.header) || r.URL.String() != s.url || r.Host != s.host ||
		r.ContentLength != s.contentLength || r.Body != s.body {
		t.Errorf("%s: the client's request changed: header %v url %s host %s length %d", when, r.Header, r.URL, r.Host, r.ContentLength)
	}
}

// Routing is pure: the same request routed twice gives the same plan,
// and the client's request is left as it came (header, query, Host,
// body, length). Only applying an attempt, to the meter's copy of the
// request, points a request at a provider.
func TestRoutePlanIsPure(t *testing.T) {
	rt := newRoutingRouter(t, planCatalog())
	rt.Random = func() float64 { return 0.25 }
	for _, c := range []struct{ name, sub, body string }{
		{"chat", "/chat/completions", `{"model":"two","messages":[{"role":"user","content":"hi"}],"max_tokens":7}`},
		{"messages", "/messages", `{"model":"two","max_tokens":7,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, _ := testgw.NewRequest("POST", "/api/v1"+c.sub+"?key=sk-client&beta=true", c.body,
				"Accept-Encoding", "gzip", "X-Goog-Api-Key", "sk-google", "Incremental", "?1",
				"Anthropic-Beta", "not-allowed", "Content-Type", "application/json")
			r.Host = "gateway.test"
			before := snapshot(r)
			plan := func() *upstream.Route {
				api, _ := admin.ClassifyRoute(admin.APIPrefix + c.sub)
				st := &pipeline.State{API: api}
				if apiErr := rt.Plan(r, st, []byte(c.body)); apiErr != nil {
					t.Fatal(apiErr)
				}
				return st.Route
			}
			first, second := plan(), plan()
			before.check(t, r, "after routing")
			if !reflect.DeepEqual(first, second) {
				t.Errorf("two plans of one request differ:\n%+v\n%+v", first, second)
			}
			if len(first.Attempts) != 2 || first.Provider != first.Attempts[0].Provider {
				t.Fatalf("plan: %d attempts, current %v", len(first.Attempts), first.Provider)
			}
			if first.InputTokens <= 0 || first.Query != "beta=true" {
				t.Errorf("input estimate %d, query %q", first.InputTokens, first.Query)
			}

			// The meter applies each attempt to its own copy.
			for i, a := range first.Attempts {
				out := metering.WithRoute(r, first)
				if err := first.Apply(out, i); err != nil {
					t.Fatal(err)
				}
				before.check(t, r, "after applying an attempt")
				sent, _ := io.ReadAll(out.Body)
				if out.Host != a.Provider.Host || out.URL.RawQuery != "beta=true" || out.ContentLength != int64(len(sent)) ||
					!strings.Contains(string(sent), `"`+a.Provider.Model+`"`) {
					t.Errorf("attempt %d: host %s query %q length %d body %s", i, out.Host, out.URL.RawQuery, out.ContentLength, sent)
				}
				for _, k := range []string{"Accept-Encoding", "X-Goog-Api-Key", "Incremental", "Authorization"} {
					if _, ok := out.Header[k]; ok {
						t.Errorf("attempt %d sends %s", i, k)
					}
				}
				if b := out.Header.Get("Anthropic-Beta"); b == "not-allowed" {
					t.Errorf("attempt %d sends a beta off the allow-list", i)
				}
				if sent, _ := withProviderKey(out); sent.Header.Get("Authorization") == "" && sent.Header.Get("X-Api-Key") == "" {
					t.Errorf("attempt %d sent without its provider key: %v", i, sent.Header)
				}
			}
		})
	}
}

// The attempts' header is the route's own map: sending an attempt never
// writes into the client's header map.
func TestRouteHeaderIsItsOwn(t *testing.T) {
	rt := newRoutingRouter(t, planCatalog())
	body := `{"model":"two","messages":[{"role":"user","content":"hi"}]}`
	r, _ := testgw.NewRequest("POST", "/api/v1/chat/completions", body, "Content-Type", "application/json")
	client := r.Header
	keys := slices.Sorted(maps.Keys(client))
	st := &pipeline.State{API: chatRoute}
	if apiErr := rt.Plan(r, st, []byte(body)); apiErr != nil {
		t.Fatal(apiErr)
	}
	out := metering.WithRoute(r, st.Route)
	if err := st.Route.Apply(out, 1); err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(client)); !slices.Equal(got, keys) {
		t.Fatalf("the client's header map changed: %v, was %v", got, keys)
	}
	if out.Header.Get("Content-Length") == "" {
		t.Fatal("the attempt has no Content-Length")
	}
}

// Through the whole pipeline, with a fallback: each attempt reaches its
// provider once, pointed at it, and the client's request is left as
// authentication left it (its key removed).
func TestPipelineLeavesTheClientRequest(t *testing.T) {
	f := newStoreFixture(t)
	a := testgw.Provider("first", "https", "one.test", "one.test:443", "/v1", "up-one", "k1")
	b := testgw.Provider("second", "http", "two.test:8000", "two.test:8000", "", "up-two", "k2")
	f.gw.ModelCatalog = catalog.New([]*catalog.Model{testgw.Model("two", 0, a, b)})
	f.tg.router.LoadBalancing = routing.LoadBalancingOrdered
	var hosts []string
	f.tg.proxies = oneUpstream{caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		sent, _ := io.ReadAll(r.Body)
		hosts = append(hosts, r.Host+" "+r.URL.RawQuery+" "+string(sent))
		if r.Host == "one.test" {
			w.WriteHeader(http.StatusInternalServerError)
			return nil
		}
		r.Body = io.NopCloser(strings.NewReader(""))
		return benchUpstreamJSON(w, r)
	})}
	body := `{"model":"two","messages":[{"role":"user","content":"hi"}]}`
	r, repl := testgw.NewRequest("POST", "/api/v1/chat/completions?key=sk-client", body,
		"Authorization", "Bearer "+f.regular, "Accept-Encoding", "gzip", "Content-Type", "application/json")
	r.Host = "gateway.test"
	before := snapshot(r)
	delete(before.header, "Authorization")
	res := testgw.Serve(t, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		return f.tg.ServeHTTP(w, r, notReached)
	}), r, repl)
	res.Must(t, http.StatusOK)
	before.check(t, r, "after serving")
	want := []string{
		`one.test  {"model":"up-one","messages":[{"role":"user","content":"hi"}]}`,
		`two.test:8000  {"model":"up-two","messages":[{"role":"user","content":"hi"}]}`,
	}
	if !slices.Equal(hosts, want) {
		t.Errorf("attempts sent:\n%q\nwant\n%q", hosts, want)
	}
}

// Routing and applying every attempt leave the body's bytes as the
// client sent them: the fields reqbody parses share them (no copy), so
// any body the gateway sends is built anew, never written in place.
func TestRoutingLeavesBodyBytes(t *testing.T) {
	rt := newRoutingRouter(t, planCatalog())
	for _, c := range []struct{ sub, body string }{
		{"/chat/completions", `{"model":"two","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"max_tokens":7,"user":"u-1","stream":true}`},
		{"/chat/completions", `{"models":["two"],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"transforms":["middle-out"],"max_completion_tokens":9}`},
		{"/messages", `{"model":"two","max_tokens":7,"system":"be brief","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":1024},"top_k":3}`},
		{"/responses", `{"model":"two","input":[{"role":"user","content":"hi"}],"max_output_tokens":20,"instructions":"be brief"}`},
	} {
		api, _ := admin.ClassifyRoute(admin.APIPrefix + c.sub)
		r, _ := testgw.NewRequest("POST", "/api/v1"+c.sub, c.body, "Content-Type", "application/json")
		body := []byte(c.body)
		st := &pipeline.State{API: api}
		if apiErr := rt.Plan(r, st, body); apiErr != nil {
			t.Fatalf("%s: %v", c.sub, apiErr)
		}
		for i := range st.Route.Attempts {
			st.Route.Attempts[i].OutputLimit = 5 // as admission's clamp sets it
			out := metering.WithRoute(r, st.Route)
			if err := st.Route.Apply(out, i); err != nil {
				t.Fatalf("%s: attempt %d: %v", c.sub, i, err)
			}
			if _, err := io.ReadAll(out.Body); err != nil {
				t.Fatal(err)
			}
		}
		if string(body) != c.body {
			t.Errorf("%s: the body changed:\n%s\nwas\n%s", c.sub, body, c.body)
		}
	}
}
