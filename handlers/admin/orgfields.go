package admin

import (
	"errors"
	"net/http"
	"strings"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// Helpers shared by the workspace, member and guardrail routes.

// Paging of the management lists (workspaces, members, guardrails,
// assignments, BYOK credentials, observability destinations, private
// endpoints): offset from 0, limit 1-100, default 50.
const (
	orgDefaultLimit = 50
	orgMaxLimit     = 100
)

// page reads offset and limit.
func (ar *adminRequest) page() (offset, limit int, apiErr *apierror.Error) {
	q := ar.r.URL.Query()
	if offset, apiErr = reqbody.IntParam(q.Get("offset"), "offset", 0, 0, -1); apiErr != nil {
		return 0, 0, apiErr
	}
	limit, apiErr = reqbody.IntParam(q.Get("limit"), "limit", orgDefaultLimit, 1, orgMaxLimit)
	return offset, limit, apiErr
}

// pageOf returns the [offset, offset+limit) window of n items.
func pageOf(n, offset, limit int) (lo, hi int) {
	lo = min(offset, n)
	return lo, min(lo+limit, n)
}

// writePage answers a list route: the [offset, offset+limit) window of all,
// each item as view shows it, and how many there are in all.
func writePage[T, V any](w http.ResponseWriter, all []T, offset, limit int, view func(T) V) {
	lo, hi := pageOf(len(all), offset, limit)
	out := make([]V, 0, hi-lo)
	for _, x := range all[lo:hi] {
		out = append(out, view(x))
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]any{"data": out, "total_count": len(all)})
}

// orgStoreError maps the store's errors of the organization routes: a
// conflict (a duplicate slug, a workspace or member that still has keys) is
// 400, the status the public API lists for these routes; a forbidden change
// is 403; the rest as storeError.
func orgStoreError(err error, what string) *apierror.Error {
	msg := func(sentinel error) string {
		return strings.TrimPrefix(err.Error(), sentinel.Error()+": ")
	}
	switch {
	case errors.Is(err, storage.ErrConflict):
		return apierror.BadRequest(msg(storage.ErrConflict))
	case errors.Is(err, storage.ErrForbidden):
		return apierror.New(http.StatusForbidden, msg(storage.ErrForbidden))
	case errors.Is(err, storage.ErrNotFound) && err != storage.ErrNotFound:
		return apierror.NotFound(msg(storage.ErrNotFound))
	}
	return storeError(err, what)
}

// creatorOf is the user behind the calling management key, if known.
func (ar *adminRequest) creatorOf() *string {
	if ar.id.Management && ar.id.MgmtKey != nil {
		return ar.id.MgmtKey.CreatorUserID
	}
	return nil
}
