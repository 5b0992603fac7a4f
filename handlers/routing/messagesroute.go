package routing

import (
	"slices"
	"strconv"

	"github.com/tidwall/gjson"
	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
)

// validateMessages checks what a Messages request must have: messages,
// and max_tokens, which Anthropic's API requires (its value was checked
// with the other output limits).
func validateMessages(f *reqbody.Fields) {
	if v, ok := f.Get("messages"); !ok || !v.IsArray() {
		f.Fail("messages", "an array of messages")
	}
	if v, ok := f.Get("max_tokens"); !ok || v.Type == gjson.Null {
		f.FailWith(apierror.BadRequest("max_tokens: required (a positive integer)"))
	}
}

// maxMessagesFallbacks bounds a Messages request's fallbacks, as the
// public API does.
const maxMessagesFallbacks = 3

// WithMessagesFallbacks adds a Messages request's fallbacks
// ([{"model":...}], the public API's form of `models` on this route) to
// its model ids, in order.
func WithMessagesFallbacks(ids []string, fallbacks, models gjson.Result) ([]string, *apierror.Error) {
	if !fallbacks.Exists() || fallbacks.Type == gjson.Null {
		return ids, nil
	}
	switch {
	case models.Exists() && models.Type != gjson.Null:
		return nil, apierror.BadRequest("fallbacks: cannot be combined with models")
	case !fallbacks.IsArray():
		return nil, apierror.BadRequest("fallbacks: expected an array of {\"model\": id} objects")
	case len(fallbacks.Array()) > maxMessagesFallbacks:
		return nil, apierror.BadRequest("fallbacks: expected at most 3 entries")
	}
	for i, fb := range fallbacks.Array() {
		m := fb.Get("model")
		if !fb.IsObject() || m.Type != gjson.String || m.Str == "" {
			return nil, apierror.BadRequest("fallbacks[" + strconv.Itoa(i) + "].model: required string")
		}
		if !slices.Contains(ids, m.Str) {
			ids = append(ids, m.Str)
		}
	}
	return ids, nil
}
