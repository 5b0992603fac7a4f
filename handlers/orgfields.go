package handlers

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

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
func (ar *adminRequest) page() (offset, limit int, apiErr *APIError) {
	q := ar.r.URL.Query()
	if offset, apiErr = intParam(q.Get("offset"), "offset", 0, 0, -1); apiErr != nil {
		return 0, 0, apiErr
	}
	limit, apiErr = intParam(q.Get("limit"), "limit", orgDefaultLimit, 1, orgMaxLimit)
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
	writeJSON(w, http.StatusOK, map[string]any{"data": out, "total_count": len(all)})
}

// orgStoreError maps the store's errors of the organization routes: a
// conflict (a duplicate slug, a workspace or member that still has keys) is
// 400, the status the public API lists for these routes; a forbidden change
// is 403; the rest as storeError.
func orgStoreError(err error, what string) *APIError {
	msg := func(sentinel error) string {
		return strings.TrimPrefix(err.Error(), sentinel.Error()+": ")
	}
	switch {
	case errors.Is(err, storage.ErrConflict):
		return BadRequest(msg(storage.ErrConflict))
	case errors.Is(err, storage.ErrForbidden):
		return newError(http.StatusForbidden, msg(storage.ErrForbidden))
	case errors.Is(err, storage.ErrNotFound) && err != storage.ErrNotFound:
		return NotFound(msg(storage.ErrNotFound))
	}
	return storeError(err, what)
}

// nullableField reads a field that may be null: absent is (zero, false),
// null (zero, true), anything else what conv makes of it; when conv
// refuses it (false), the field fails with want ("a boolean or null").
func nullableField[T any](f *fields, name, want string, conv func(gjson.Result) (T, bool)) (T, bool) {
	var zero T
	v, ok := f.get(name)
	if !ok {
		return zero, false
	}
	if v.Type == gjson.Null {
		return zero, true
	}
	x, ok := conv(v)
	if !ok {
		f.fail(name, want)
		return zero, false
	}
	return x, true
}

// nullableArray reads an array field or null (nil, true); elem converts
// one entry, false when it is not of the kind want describes ("an array of
// strings or null"). An empty array is non-nil.
func nullableArray[T any](f *fields, name, want string, elem func(gjson.Result) (T, bool)) ([]T, bool) {
	return nullableField(f, name, want, func(v gjson.Result) ([]T, bool) {
		if !v.IsArray() {
			return nil, false
		}
		out := []T{}
		for _, e := range v.Array() {
			x, ok := elem(e)
			if !ok {
				return nil, false
			}
			out = append(out, x)
		}
		return out, true
	})
}

// NullableStrings reads an array of strings or null (nil, true).
func (f *fields) NullableStrings(name string) ([]string, bool) {
	return nullableArray(f, name, "an array of strings or null", func(e gjson.Result) (string, bool) {
		return e.Str, e.Type == gjson.String
	})
}

// Strings reads a required non-empty array of non-empty strings.
func (f *fields) Strings(name string) []string {
	v, ok := f.get(name)
	if !ok || !v.IsArray() || len(v.Array()) == 0 {
		f.fail(name, "a non-empty array of strings")
		return nil
	}
	var out []string
	for _, e := range v.Array() {
		if e.Type != gjson.String || e.Str == "" {
			f.fail(name, "a non-empty array of strings")
			return nil
		}
		out = append(out, e.Str)
	}
	return out
}

// NullableInts reads an array of integers or null.
func (f *fields) NullableInts(name string) ([]int64, bool) {
	return nullableArray(f, name, "an array of integers or null", func(e gjson.Result) (int64, bool) {
		return e.Int(), e.Type == gjson.Number && e.Float() == float64(e.Int())
	})
}

// Number reads a number field.
func (f *fields) Number(name string) (float64, bool) {
	v, ok := f.get(name)
	if !ok {
		return 0, false
	}
	if v.Type != gjson.Number {
		f.fail(name, "a number")
		return 0, false
	}
	return v.Float(), true
}

// NullableBool reads a boolean or null.
func (f *fields) NullableBool(name string) (*bool, bool) {
	return nullableField(f, name, "a boolean or null", func(v gjson.Result) (*bool, bool) {
		b := v.Bool()
		return &b, v.IsBool()
	})
}

// NullableRaw reads a JSON array field as it was sent, or null.
func (f *fields) NullableRaw(name string) (json.RawMessage, bool) {
	return nullableField(f, name, "an array or null", func(v gjson.Result) (json.RawMessage, bool) {
		return json.RawMessage(v.Raw), v.IsArray()
	})
}

// creatorOf is the user behind the calling management key, if known.
func (ar *adminRequest) creatorOf() *string {
	if ar.id.Management && ar.id.MgmtKey != nil {
		return ar.id.MgmtKey.CreatorUserID
	}
	return nil
}
