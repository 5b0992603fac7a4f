package handlers

import (
	"net/http"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/autorouter"
	"github.com/tollgate-dev/caddy-tollgate/handlers/routing"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// The auto model routes to the candidate the auto router chooses, which
// the route (and so the answer, the hold and the generation record)
// names; the route keeps the auto model as its router.
func TestRouterChoosesAutoModel(t *testing.T) {
	cat := catalog.New([]*catalog.Model{
		testgw.Model("acme/small", 2, testgw.UpstreamProvider("/v1")),
		testgw.Model("acme/cheap", 1, testgw.UpstreamProvider("/v1")),
	})
	router := func() *routing.Router {
		return &routing.Router{Plugins: plugin.Set{&autorouter.AutoRouter{Models: []string{"acme/small", "acme/cheap"}}}}
	}
	for body, want := range map[string]string{
		`{"model":"openrouter/auto","messages":[{"role":"user","content":"hi"}]}`:                                      "acme/small",
		`{"model":"openrouter/auto","messages":[],"plugins":[{"id":"auto-router","cost_tier":"low"}]}`:                 "acme/cheap",
		`{"model":"openrouter/auto","messages":[],"plugins":[{"id":"auto-beta-router","allowed_models":["*/cheap"]}]}`: "acme/cheap",
		`{"model":"openrouter/auto","models":["acme/small"],"messages":[{"role":"user","content":"hi"}]}`:              "acme/small",
	} {
		c := routerWithCatalog(t, router(), cat)
		r, repl := testgw.NewRequest("POST", "/api/v1/chat/completions", body)
		c.doRouter(t, r, repl).Must(t, http.StatusTeapot)
		if c.got == nil || c.got.route == nil || c.got.route.Model.ID != want || c.got.route.Router != "openrouter/auto" {
			t.Errorf("%s: route %+v", body, c.got)
			continue
		}
		if n := len(c.got.route.Attempts); n != 1 {
			t.Errorf("%s: %d attempts, want the chosen model's one", body, n)
		}
		if v, _ := repl.Get("tollgate.model"); v != want {
			t.Errorf("%s: tollgate.model = %v", body, v)
		}
	}
	for body, want := range map[string]string{
		`{"model":"openrouter/auto","messages":[],"tools":[{"type":"function","function":{"name":"f"}}]}`: `model: no candidate of the auto router fits the request (acme/small: no tools in its supported_parameters; acme/cheap: no tools in its supported_parameters)`,
		`{"model":"openrouter/auto","messages":[],"plugins":[{"id":"auto-router","pin_model":true}]}`:     `plugins[0].pin_model: not offered by this gateway (its answers' messages carry no model to pin)`,
		`{"model":"acme/small","messages":[],"plugins":[{"id":"auto-router","cost_tier":1}]}`:             `plugins[0].cost_tier: expected one of low, medium, high, xhigh, max`,
	} {
		c := routerWithCatalog(t, router(), cat)
		r, repl := testgw.NewRequest("POST", "/api/v1/chat/completions", body)
		c.doRouter(t, r, repl).WantError(t, 400, want)
	}
	// Without candidates the auto model is an unknown model, as before.
	c := routerWithCatalog(t, &routing.Router{Plugins: plugin.Set{new(autorouter.AutoRouter)}}, cat)
	r, repl := testgw.NewRequest("POST", "/api/v1/chat/completions", `{"model":"openrouter/auto","messages":[]}`)
	c.doRouter(t, r, repl).WantError(t, 400, `model: unknown model "openrouter/auto"`)
}
