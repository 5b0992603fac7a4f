package handlers

import (
	"net/http"

	"github.com/tollgate-dev/caddy-tollgate/handlers/admin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/apierror"
)

// msgStoreUnavailable answers requests that would change state while the
// shared database (storage redis) cannot be reached: the gateway serves
// nothing it could not meter and writes nothing it could not keep.
const msgStoreUnavailable = "The gateway's database is unavailable; retry shortly"

func errStoreUnavailable() *apierror.Error {
	return apierror.New(http.StatusServiceUnavailable, msgStoreUnavailable)
}

// refuseWhileUnavailable answers 503 to an inference request or a write
// while the shared database is down; reads are still served from memory.
// On Badger the store is always available.
func (t *Tollgate) refuseWhileUnavailable(r *http.Request, kind admin.RouteKind, scim bool) *apierror.Error {
	write := r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions
	if !write || (!scim && kind != admin.RouteInference && kind != admin.RouteManagement && kind != admin.RouteAnyKey) {
		return nil
	}
	store, err := t.auth.gw.Store()
	if err != nil || store.Available() {
		return nil
	}
	return errStoreUnavailable()
}
