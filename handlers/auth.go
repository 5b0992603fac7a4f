package handlers

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/abuse"
	"github.com/tollgate-dev/caddy-tollgate/handlers/admin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/metering"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// RateCeiling is one abuse ceiling: Requests per Window, with bursts up
// to Burst (package abuse).
type RateCeiling = abuse.Ceiling

// now is the handlers' clock; tests replace it to cross UTC boundaries.
var now = time.Now

// Auth is the pipeline's first stage: it authenticates the bearer key of
// every request under /api/v1 and decides whether that kind of key may
// call the route: regular keys call inference routes, management keys the
// administrative ones. It refuses with 401 and 403, and 404 for paths
// under /api/v1 that the gateway does not serve, so that they never reach
// a provider. The connect flow's code exchange (admin.RouteKeyless) takes
// no key: its code and verifier are its credential.
//
// On success the caller's identity goes into the request state for the
// stages after it, and is exposed as placeholders for logs:
// {tollgate.key.hash}, {tollgate.key.kind}, {tollgate.account.id},
// {tollgate.workspace.id}; {http.auth.user.id} is the key hash, as with
// Caddy's own authentication. The client's Authorization header is removed,
// so that it can never be forwarded upstream.
//
// PerIP and PerKey are the abuse ceilings in front of everything (the
// gateway's defence against floods): a client IP (as Caddy resolves it, honouring
// trusted_proxies) is limited before its key is even looked up, a key
// after. Both answer the platform's 429.
type Auth struct {
	PerIP  *RateCeiling `json:"per_ip,omitempty"`
	PerKey *RateCeiling `json:"per_key,omitempty"`

	gw     gateway.Gateway
	logger *zap.Logger
	byIP   *abuse.Buckets
	byKey  *abuse.Buckets
}

// Messages of the 401 and 403 answers.
const (
	msgMissingAuth    = "Missing Authentication header"
	msgInvalidKey     = metering.MsgInvalidKey
	msgDisabledKey    = "API key is disabled"
	msgExpiredKey     = "API key expired"
	msgManagementOnly = "Only management keys can perform this operation"
	msgNoInference    = "Management keys cannot call inference routes; use a regular API key"
)

// msgExpiredOAuth is the 401 of a key of the connect flow whose expiry
// (the one the app asked for: the person's "OAuth session" with the app)
// has passed.
const msgExpiredOAuth = "OAuth session expired: the key this app holds reached its expires_at; connect the app again"

// authenticate identifies the caller of a route under /api/v1 into st, or
// refuses: 404 for a path the gateway does not serve (it never reaches a
// provider), 401, 403, and the abuse ceilings' 429.
func (a *Auth) authenticate(r *http.Request, st *pipeline.State) *apierror.Error {
	if st.API.Kind == admin.RouteUnknown {
		return apierror.NotFound("Not found: " + r.Method + " " + r.URL.Path)
	}
	if a.byIP != nil {
		ip, _ := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string)
		if apiErr := a.ceiling(a.byIP, ip, "per_ip"); apiErr != nil {
			return apiErr
		}
	}
	if st.API.Kind == admin.RouteKeyless {
		// Its credential is in the body; a key sent along is not checked,
		// and goes no further than any other.
		r.Header.Del("Authorization")
		r.Header.Del("X-Api-Key")
		return nil
	}
	secret, present := bearer(r)
	if !present && st.API.Dialect() == dialect.Messages {
		secret, present = anthropicAPIKey(r)
	}
	// A key sent Anthropic's way never reaches a provider either.
	r.Header.Del("X-Api-Key")
	if !present {
		if st.API.Kind == admin.RoutePublic {
			r.Header.Del("Authorization") // a malformed header must not reach the provider either
			return nil
		}
		return apierror.New(http.StatusUnauthorized, msgMissingAuth)
	}
	id, apiErr := a.identify(st.Store, secret, st.API.Kind)
	if apiErr != nil {
		return apiErr
	}
	if a.byKey != nil {
		if apiErr := a.ceiling(a.byKey, id.Hash, "per_key"); apiErr != nil {
			return apiErr
		}
	}
	delete(r.Header, "Authorization") // Header.Del, without canonicalizing a canonical name
	st.ID = id
	a.annotate(r, st)
	return nil
}

// identify resolves the key in the request's store and checks that it
// may call a route of kind.
func (a *Auth) identify(store *storage.Store, secret string, kind admin.RouteKind) (*gateway.Identity, *apierror.Error) {
	if store == nil {
		return nil, pipeline.StoreUnavailable() // no key can be known: none is taken
	}
	// The identity and the key's record in one allocation.
	own := new(struct {
		id  gateway.Identity
		key storage.APIKey
	})
	p, err := store.AuthenticateInto(secret, &own.key)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, apierror.New(http.StatusUnauthorized, msgInvalidKey)
	}
	if err != nil {
		return nil, apierror.New(http.StatusInternalServerError, "Internal Server Error")
	}
	acct, ok := store.AccountSnapshot(p.AccountID)
	if !ok {
		return nil, apierror.New(http.StatusUnauthorized, msgInvalidKey)
	}
	t := now()
	if p.Management {
		if p.MgmtKey.Expired(t) {
			return nil, apierror.New(http.StatusUnauthorized, msgExpiredKey)
		}
		if kind == admin.RouteInference {
			return nil, apierror.New(http.StatusForbidden, msgNoInference)
		}
	} else {
		if p.Key.Disabled {
			return nil, apierror.New(http.StatusUnauthorized, msgDisabledKey)
		}
		if p.Key.Expired(t) {
			if p.Key.Connect != nil {
				return nil, apierror.New(http.StatusUnauthorized, msgExpiredOAuth)
			}
			return nil, apierror.New(http.StatusUnauthorized, msgExpiredKey)
		}
		if kind == admin.RouteManagement {
			return nil, apierror.New(http.StatusForbidden, msgManagementOnly)
		}
	}
	own.id = gateway.Identity{Principal: p, Account: acct}
	return &own.id, nil
}

// ceiling takes a token from the named bucket or answers 429.
func (a *Auth) ceiling(c *abuse.Buckets, name, scope string) *apierror.Error {
	t := now()
	ok, next := c.Allow(name, t)
	if ok {
		return nil
	}
	return metering.RateLimitError(&gateway.RateLimited{Limit: int64(c.Burst()), Reset: next, Scope: "abuse_" + scope}, t)
}

// annotate exposes the identity to logs and later handlers as placeholders
// (pipeline.State.Placeholder).
func (a *Auth) annotate(r *http.Request, st *pipeline.State) {
	st.ExposePlaceholders(r)
}

// bearer extracts the key from "Authorization: Bearer <key>".
func bearer(r *http.Request) (string, bool) {
	v := r.Header["Authorization"] // Header.Get, without canonicalizing a canonical name
	if len(v) == 0 || v[0] == "" {
		return "", false
	}
	h := v[0]
	scheme, token, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
