package handlers

import (
	"net/http"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/routing"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// A family alias routes to the family's newest model, which the route
// (and so the answer and the generation record) names.
func TestRouterResolvesAliases(t *testing.T) {
	older := testgw.Model("acme/big-1", 0, testgw.UpstreamProvider("/v1"))
	newest := testgw.Model("acme/big-2.5", 0, testgw.UpstreamProvider("/v1"))
	cat := catalog.New([]*catalog.Model{older, newest})
	for _, tt := range []struct{ target, body string }{
		{"/api/v1/chat/completions", `{"model":"~acme/big-latest","messages":[{"role":"user","content":"hi"}]}`},
		{"/api/v1/chat/completions", `{"model":"~acme/big-latest:floor","messages":[{"role":"user","content":"hi"}]}`},
		{"/api/v1/chat/completions", `{"models":["~acme/big-latest"],"messages":[{"role":"user","content":"hi"}]}`},
		{"/api/v1/responses", `{"model":"~acme/big-latest","input":"hi"}`},
		{"/api/v1/embeddings", `{"model":"~acme/big-latest","input":"hi"}`},
	} {
		c := routerWithCatalog(t, new(routing.Router), cat)
		r, repl := testgw.NewRequest("POST", tt.target, tt.body)
		c.doRouter(t, r, repl).Must(t, http.StatusTeapot)
		if c.got == nil || c.got.route == nil || c.got.route.Model.ID != "acme/big-2.5" {
			t.Errorf("%s %s: route %+v", tt.target, tt.body, c.got)
		}
		if v, _ := repl.Get("tollgate.model"); v != "acme/big-2.5" {
			t.Errorf("%s: tollgate.model = %v", tt.body, v)
		}
	}

	// An alias and the model it names: the model's endpoints once.
	for _, body := range []string{
		`{"model":"~acme/big-latest","models":["acme/big-2.5","acme/big-1"],"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"acme/big-2.5","models":["~acme/big-latest","acme/big-1"],"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"acme/big-2.5","models":["~acme/big-latest:nitro","acme/big-1"],"messages":[{"role":"user","content":"hi"}]}`,
	} {
		c := routerWithCatalog(t, new(routing.Router), cat)
		r, repl := testgw.NewRequest("POST", "/api/v1/chat/completions", body)
		c.doRouter(t, r, repl).Must(t, http.StatusTeapot)
		if c.got == nil || c.got.route == nil || len(c.got.route.Attempts) != 2 ||
			c.got.route.Attempts[0].Model.ID != "acme/big-2.5" || c.got.route.Attempts[1].Model.ID != "acme/big-1" {
			t.Errorf("%s: attempts %+v", body, c.got)
		}
	}

	c := routerWithCatalog(t, new(routing.Router), cat)
	r, repl := testgw.NewRequest("POST", "/api/v1/chat/completions", `{"model":"~acme/small-latest","messages":[]}`)
	c.doRouter(t, r, repl).WantError(t, 400, `model: unknown model "~acme/small-latest"`)
	if c.got != nil {
		t.Error("an unknown alias reached the upstream")
	}
}
