package admin

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
)

// purgeResponseCache removes the caller's account's entries from the
// response cache: every one, or a model's (?model=). With the cache off
// there are none.
func (ar *adminRequest) purgeResponseCache() *apierror.Error {
	model := ar.r.URL.Query().Get("model")
	n := 0
	if ar.cache != nil {
		var err error
		if n, err = ar.cache.PurgeResponses(ar.r.Context(), ar.store, ar.id.AccountID, model); err != nil {
			ar.logger.Warn("purging the response cache failed", zap.Error(err))
			return apierror.New(http.StatusServiceUnavailable, "The response cache could not be purged; try again")
		}
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": map[string]any{"deleted": n}})
	return nil
}
