package routing

import (
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/admin"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

var chatRoute, _ = admin.ClassifyRoute(admin.APIPrefix + "/chat/completions")

// newRoutingRouter is a router over cat, provisioned.
func newRoutingRouter(t *testing.T, cat *catalog.Catalog) *Router {
	t.Helper()
	gw := testgw.New(t)
	gw.ModelCatalog = cat
	rt := &Router{Gateway: gw}
	if err := rt.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	return rt
}
