package admin

import (
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// upstreamRequest is what a request the administrative stage does not
// serve carried on to the stage after it.
type upstreamRequest struct {
	method, path string
}

// chain serves requests as the pipeline does for the administrative
// routes: classified by the route table, the caller looked up by its key
// (authentication's own checks are package handlers' tests), then Admin.
// A request of another kind goes on: got records it.
type chain struct {
	gw    *testgw.Gateway
	admin *Admin
	got   *upstreamRequest // nil until a request went past Admin
}

func newChain(t *testing.T) *chain {
	t.Helper()
	gw := testgw.New(t)
	return &chain{gw: gw, admin: New(gw, zap.NewNop(), nil)}
}

func (c *chain) serveHTTP(w http.ResponseWriter, r *http.Request) error {
	api, _ := ClassifyRoute(r.URL.Path)
	if api.Kind != RouteManagement && api.Kind != RouteAnyKey {
		c.got = &upstreamRequest{method: r.Method, path: r.URL.Path}
		w.WriteHeader(http.StatusTeapot)
		return nil
	}
	secret, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	p, err := c.gw.Storage.Authenticate(secret)
	if err != nil {
		return apierror.Fail(r, apierror.New(http.StatusUnauthorized, msgInvalidKey))
	}
	acct, _ := c.gw.Storage.AccountSnapshot(p.AccountID)
	return c.admin.Serve(w, r, c.gw.Storage, &gateway.Identity{Principal: p, Account: acct}, api)
}

// do sends a request through the chain; key may be empty for no
// Authorization header.
func (c *chain) do(t *testing.T, method, target, key, body string, headers ...string) testgw.Response {
	t.Helper()
	c.got = nil
	return testgw.Send(t, caddyhttp.HandlerFunc(c.serveHTTP), method, target, key, body, headers...)
}
