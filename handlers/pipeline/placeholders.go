package pipeline

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
)

// ExposePlaceholders has the request's replacer resolve the state's
// placeholders (Placeholder), once: the identity's, and the route's once
// routed.
func (st *State) ExposePlaceholders(r *http.Request) {
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok && !st.Mapped {
		st.Mapped = true
		repl.Map(st.Placeholder)
	}
}

// MapRoute exposes the route's placeholders to reverse_proxy and the
// logs; they name the current attempt.
func (st *State) MapRoute(r *http.Request) {
	st.Routed = true
	st.ExposePlaceholders(r)
}

// Placeholder resolves the request's placeholders: the identity's once
// authenticated, the route's once MapRoute exposed them. One function for
// both: each Map costs the request a closure, and every lookup a call per
// function.
func (st *State) Placeholder(key string) (any, bool) {
	if st.Routed {
		if v, ok := st.Route.Placeholder(key); ok {
			return v, true
		}
	}
	if st.ID != nil {
		return identityPlaceholder(st.ID, key)
	}
	return nil, false
}

// identityPlaceholder resolves the identity's placeholders on lookup: most
// requests never read them (http.auth.user.id is read only by access
// logs), and setting each would grow the replacer's map and box its value
// on every request.
func identityPlaceholder(id *gateway.Identity, key string) (any, bool) {
	switch key {
	case "http.auth.user.id", "tollgate.key.hash":
		return id.Hash, true
	case "tollgate.key.kind":
		if id.Management {
			return "management", true
		}
		return "regular", true
	case "tollgate.account.id":
		return id.AccountID, true
	case "tollgate.workspace.id":
		if id.Management {
			return "", true
		}
		return id.Key.WorkspaceID, true
	}
	return nil, false
}

// MsgStoreUnavailable answers requests that would change state while the
// shared database (storage redis) cannot be reached: the gateway serves
// nothing it could not meter and writes nothing it could not keep.
const MsgStoreUnavailable = "The gateway's database is unavailable; retry shortly"

// StoreUnavailable is the error of a request the store cannot serve now.
func StoreUnavailable() *apierror.Error {
	return apierror.New(http.StatusServiceUnavailable, MsgStoreUnavailable)
}
