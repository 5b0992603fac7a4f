package handlers

import (
	"net/http"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/admin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/metering"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"go.uber.org/zap"
)

// openStore resolves the gateway's store for a request, once, at its
// start: the one place that answers a store that cannot be had (the
// database could not be opened), with 503. Every stage after it uses
// the request state's store, so none has an error of its own to handle
// and none can serve a request as if the store had nothing (no key, no
// guardrail, no budget).
func (t *Tollgate) openStore() (*storage.Store, *apierror.Error) {
	store, err := t.auth.gw.Store()
	if err != nil {
		t.logger.Error("store unavailable", zap.Error(err))
		return nil, pipeline.StoreUnavailable()
	}
	return store, nil
}

// refuseWhileUnavailable answers 503 to an inference request or a write
// while the shared database is down or the replica is reloading its
// records from it; reads are still served from memory. On Badger the
// store is always available and synced.
func (t *Tollgate) refuseWhileUnavailable(r *http.Request, store *storage.Store, kind admin.RouteKind, scim bool) *apierror.Error {
	write := r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions
	if !write || store == nil || (!scim && kind != admin.RouteInference && kind != admin.RouteManagement && kind != admin.RouteAnyKey && kind != admin.RouteKeyless) {
		return nil
	}
	if t.shareCeiling != nil {
		t.shareCeiling.Do(func() { store.ShareKeyCeiling(sharedCeiling(t.PerKey)) })
	}
	if !store.Available() {
		return pipeline.StoreUnavailable()
	}
	if !store.Synced() {
		return metering.ErrStoreResyncing()
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
