// Package sticky keeps a conversation's requests on the endpoint that
// served it (sticky routing), so that the provider's prompt cache keeps
// serving its prefix: the request's session id (the body's session_id,
// else the x-session-id header), the conversation's key, and the choice
// routing made with it (Choice), which the meter completes with the
// endpoint that answered.
package sticky

import (
	"net/http"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
)

// HeaderName is the header that carries a session id; the body's
// session_id wins over it. Canonical, so that it is read without
// canonicalizing.
const HeaderName = "X-Session-Id"

// SessionID is a request's session id: the body's session_id, else the
// x-session-id header; "" when neither names one. The body's field was
// checked with the body (a string of at most 256 characters); the
// header is checked here, its 400 naming it.
func SessionID(f *reqbody.Fields, h http.Header) (string, *apierror.Error) {
	if v, ok := f.Get("session_id"); ok && v.Str != "" {
		return v.Str, nil
	}
	vs := h[HeaderName]
	if len(vs) == 0 || vs[0] == "" {
		return "", nil
	}
	if apiErr := reqbody.CheckString("x-session-id", vs[0]); apiErr != nil {
		return "", apiErr
	}
	return vs[0], nil
}
