package handlers

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/admin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/metering"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/websearch"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/handlers/routing"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
)

// The stages as separate middlewares, for tests that run a part of the
// pipeline (the router alone, auth and admin in front of a recorder, ...).
// Tollgate.ServeHTTP is the production composition; these adapters call the
// same stage methods and carry the request state in the request's context
// so that a recording upstream can read it (IdentityFrom, RouteFrom).

type testStateKey struct{}

// stateOf returns the request state an earlier adapter made, or a new one
// with the route classified.
func stateOf(r *http.Request) (*pipeline.State, *http.Request) {
	if st, ok := r.Context().Value(testStateKey{}).(*pipeline.State); ok {
		return st, r
	}
	api, _ := admin.ClassifyRoute(r.URL.Path)
	st := &pipeline.State{API: api}
	return st, r.WithContext(context.WithValue(r.Context(), testStateKey{}, st))
}

// useStore resolves the gateway's store into st, as Tollgate.ServeHTTP
// does, unless an earlier stage did.
func useStore(st *pipeline.State, gw gateway.Gateway) {
	if st.Store == nil && gw != nil {
		st.Store, _ = gw.Store()
	}
}

// chatRoute is /chat/completions's route, as ClassifyRoute makes it.
var chatRoute, _ = admin.ClassifyRoute(admin.APIPrefix + "/chat/completions")

// IdentityFrom is the identity the auth stage found.
func IdentityFrom(r *http.Request) (*gateway.Identity, bool) {
	st, ok := r.Context().Value(testStateKey{}).(*pipeline.State)
	if !ok || st.ID == nil {
		return nil, false
	}
	return st.ID, true
}

// RouteFrom is the route the router stage made.
func RouteFrom(r *http.Request) (*upstream.Route, bool) {
	st, ok := r.Context().Value(testStateKey{}).(*pipeline.State)
	if !ok || st.Route == nil {
		return nil, false
	}
	return st.Route, true
}

// asSent is r as its provider receives it: with the provider key that the
// proxies' transport adds (keyTransport), also when the router stage
// hands the request to a test's upstream without the meter.
func asSent(r *http.Request) *http.Request {
	if metering.AttemptRoute(r) == nil {
		if rt, ok := RouteFrom(r); ok {
			r = metering.WithRoute(r, rt)
		}
	}
	sent, err := withProviderKey(r)
	if err != nil {
		panic(err)
	}
	return sent
}

func (a *Auth) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if _, ok := admin.ClassifyRoute(r.URL.Path); !ok {
		return next.ServeHTTP(w, r)
	}
	st, r := stateOf(r)
	useStore(st, a.gw)
	if apiErr := a.authenticate(r, st); apiErr != nil {
		return apierror.Fail(r, apiErr)
	}
	return next.ServeHTTP(w, r)
}

// adminStage is the pipeline's administrative step as a middleware.
type adminStage struct{ *admin.Admin }

func (a adminStage) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if isSCIMPath(r.URL.Path) {
		return a.ServeSCIM(w, r)
	}
	st, r := stateOf(r)
	if st.API.Kind != admin.RouteManagement && st.API.Kind != admin.RouteAnyKey {
		return next.ServeHTTP(w, r)
	}
	return a.Serve(w, r, st.Store, st.ID, st.API)
}

// searchMW is the web search plugin's plan before routing as a
// middleware, with the citation writer around the rest.
type searchMW struct{ *websearch.WebSearch }

func (m searchMW) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	st, r := stateOf(r)
	if r.Method != http.MethodPost {
		return next.ServeHTTP(w, r)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	req := &plugin.Request{Kind: st.API.Dialect(), Body: body, Ctx: r.Context(), Header: w.Header(), Filters: guardrails{st}}
	out, run, apiErr := m.Preroute(req)
	if apiErr != nil {
		return apierror.Fail(r, apiErr)
	}
	setBody(r, out)
	if run != nil {
		st.Plugins = append(st.OwnPlugins[:0], run)
	}
	cw := newCiteWriter(w, st)
	if cw == nil {
		return next.ServeHTTP(w, r)
	}
	err = next.ServeHTTP(cw, r)
	cw.Finish()
	return err
}

// routerMW is the router as a middleware.
type routerMW struct{ *routing.Router }

func (m routerMW) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	rt := m.Router
	st, r := stateOf(r)
	useStore(st, rt.Gateway)
	if st.API.Kind != admin.RouteInference && st.API.Kind != admin.RoutePublic {
		return next.ServeHTTP(w, r)
	}
	if r.Method != http.MethodPost || (st.API.Op != admin.OpInfer && st.API.Op != admin.OpInferBelow) {
		return rt.ServeOther(w, r, st)
	}
	body, apiErr := reqbody.Read(w, r, rt.MaxBodyBytes)
	if apiErr == nil {
		apiErr = rt.Plan(r, st, body)
	}
	if apiErr != nil {
		return apierror.Fail(r, apiErr)
	}
	// As the pipeline and the meter do: the placeholders, and the first
	// attempt applied to the meter's copy of the request.
	st.MapRoute(r)
	out := metering.WithRoute(r, st.Route)
	if err := st.Route.Apply(out, 0); err != nil {
		return err
	}
	return next.ServeHTTP(w, out)
}

// meterMW is the meter as a middleware over gw's store.
type meterMW struct {
	m  *metering.Meter
	gw gateway.Gateway
}

// newMeterMW is the meter of gw, logging nothing.
func newMeterMW(gw gateway.Gateway) meterMW {
	m := metering.New(gw, zap.NewNop())
	return meterMW{&m, gw}
}

func (m meterMW) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	st, r := stateOf(r)
	useStore(st, m.gw)
	if st.Route == nil {
		return next.ServeHTTP(w, r)
	}
	return m.m.Run(w, r, st, oneUpstream{next})
}

// oneUpstream sends every attempt to one handler, the tests' provider (a
// recorder sees the provider key through asSent, as the proxies'
// transport adds it).
type oneUpstream struct{ caddyhttp.Handler }

func (u oneUpstream) Forward(*catalog.Provider) caddyhttp.Handler { return u.Handler }

// newTestTollgate is the tollgate handler over gw, as Provision makes it.
func newTestTollgate(t testing.TB, gw gateway.Gateway) *Tollgate {
	t.Helper()
	tg := new(Tollgate)
	if err := tg.setup(gw, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tg.Cleanup() })
	return tg
}

// errorRoute writes the errors h returns as the tollgate directive's error
// route does (ErrorWriter).
func errorRoute(h caddyhttp.Handler) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		err := h.ServeHTTP(w, r)
		var apiErr *apierror.Error
		if errors.As(err, &apiErr) {
			apierror.Write(w, apiErr)
			return nil
		}
		return err
	})
}

// setBody replaces the request body with bytes already in memory, which
// readBody then takes as they are instead of copying them again.
func setBody(r *http.Request, body []byte) {
	r.Body = http.NoBody
	if len(body) > 0 {
		r.Body = reqbody.NewBuffered(body)
	}
	r.ContentLength = int64(len(body))
	r.Header.Set("Content-Length", strconv.Itoa(len(body)))
}
