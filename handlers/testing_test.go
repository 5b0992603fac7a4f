package handlers

import (
	"io"
	"net/http"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/sjson"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/admin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/routing"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// forUpstream is an inference body as the router forwards it to the
// fixture's provider: model "m" renamed to the provider's id.
func forUpstream(body string) string {
	out, err := sjson.Set(body, "model", testgw.UpstreamModel)
	if err != nil {
		panic(err)
	}
	return out
}

// upstreamRequest is what the handler after the chain received.
type upstreamRequest struct {
	method        string
	path          string
	rawQuery      string
	host          string
	header        http.Header
	body          []byte
	contentLength int64
	identity      *gateway.Identity
	route         *upstream.Route // nil when the router did not route the request
}

// chain is Auth, the administrative stage and Router in the order the Caddyfile directives put
// them, in front of a recording upstream that answers 418. The router routes
// by the gateway's catalog, testgw.Catalog("/v1").
type chain struct {
	gw     *testgw.Gateway
	auth   *Auth
	admin  adminStage
	router *routing.Router
	got    *upstreamRequest // nil until the upstream is reached
}

func newChain(t *testing.T) *chain {
	t.Helper()
	gw := testgw.New(t)
	rt := &routing.Router{Gateway: gw}
	if err := rt.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	return &chain{
		gw:     gw,
		auth:   &Auth{gw: gw, logger: zap.NewNop()},
		admin:  adminStage{admin.New(gw, zap.NewNop(), nil)},
		router: rt,
	}
}

// upstream is the recording last handler.
func (c *chain) upstream(t *testing.T) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		r = asSent(r)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("upstream reading body: %v", err)
		}
		id, _ := IdentityFrom(r)
		route, _ := RouteFrom(r)
		c.got = &upstreamRequest{
			method: r.Method, path: r.URL.Path, rawQuery: r.URL.RawQuery, host: r.Host,
			header: r.Header.Clone(), body: body, contentLength: r.ContentLength, identity: id, route: route,
		}
		w.WriteHeader(http.StatusTeapot)
		return nil
	})
}

func (c *chain) handler(t *testing.T) caddyhttp.Handler {
	up := c.upstream(t)
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		return c.auth.ServeHTTP(w, r, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			return c.admin.ServeHTTP(w, r, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
				return routerMW{c.router}.ServeHTTP(w, r, up)
			}))
		}))
	})
}

// do sends a request through the chain; key may be empty for no
// Authorization header.
func (c *chain) do(t *testing.T, method, target, key, body string, headers ...string) testgw.Response {
	t.Helper()
	c.got = nil
	return testgw.Send(t, c.handler(t), method, target, key, body, headers...)
}

// handlerOf binds a middleware to the handler after it.
func handlerOf(m caddyhttp.MiddlewareHandler, next caddyhttp.Handler) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		return m.ServeHTTP(w, r, next)
	})
}
