package handlers

import (
	"net/http"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/admin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/apierror"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// msgStoreUnavailable answers requests that would change state while the
// shared database (storage redis) cannot be reached: the gateway serves
// nothing it could not meter and writes nothing it could not keep.
const msgStoreUnavailable = "The gateway's database is unavailable; retry shortly"

func errStoreUnavailable() *apierror.Error {
	return apierror.New(http.StatusServiceUnavailable, msgStoreUnavailable)
}

// msgStoreResyncing answers them while a replica reloads every record
// from the shared database because its change feed lost continuity (a
// Redis restart or failover, a broken connection, a gap): until then its
// copy of keys, budgets and guardrails may be stale, so it decides nothing.
const msgStoreResyncing = "The gateway is reloading its records from the shared database; retry shortly"

func errStoreResyncing() *apierror.Error {
	return apierror.New(http.StatusServiceUnavailable, msgStoreResyncing)
}

// refuseWhileUnavailable answers 503 to an inference request or a write
// while the shared database is down or the replica is reloading its
// records from it; reads are still served from memory. On Badger the
// store is always available and synced.
func (t *Tollgate) refuseWhileUnavailable(r *http.Request, kind admin.RouteKind, scim bool) *apierror.Error {
	write := r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions
	if !write || (!scim && kind != admin.RouteInference && kind != admin.RouteManagement && kind != admin.RouteAnyKey && kind != admin.RouteKeyless) {
		return nil
	}
	store, err := t.auth.gw.Store()
	if err != nil {
		return nil
	}
	if t.shareCeiling != nil {
		t.shareCeiling.Do(func() { store.ShareKeyCeiling(sharedCeiling(t.PerKey)) })
	}
	if !store.Available() {
		return errStoreUnavailable()
	}
	if !store.Synced() {
		return errStoreResyncing()
	}
	return nil
}

// sharedCeiling is the per_key ceiling that the replicas on storage redis
// enforce together at admission (each replica also keeps its own bucket
// in front of everything); nil when there is none.
func sharedCeiling(c *RateCeiling) *storage.KeyCeiling {
	if c == nil || c.Requests <= 0 || c.Window <= 0 {
		return nil
	}
	burst := c.Burst
	if burst <= 0 {
		burst = int(c.Requests)
	}
	return &storage.KeyCeiling{Requests: float64(c.Requests), Window: time.Duration(c.Window), Burst: burst}
}

// ceilingRefusal is the 429 of the shared per-key ceiling: the same answer
// as the replica's own per_key bucket gives.
func ceilingRefusal(e *storage.CeilingError) *apierror.Error {
	return rateLimitError(&gateway.RateLimited{Limit: int64(e.Burst), Reset: e.Reset, Scope: "abuse_per_key"}, now())
}
