package oidc

import (
	"net/http"
)

// Handler serves the two sign-in routes, BeginPath (GET, ?account=<id>)
// and CallbackPath (GET, the provider's redirect), for a host that keeps
// the sessions: SignedIn starts the session of a matched member and
// answers (e.g. a redirect to the dashboard).
type Handler struct {
	Service *Service
	// SignedIn starts the member's session and answers the request.
	SignedIn func(w http.ResponseWriter, r *http.Request, id Identity)
	// Refused answers a refused sign-in; default: WriteErrorPage with a
	// link back to SignInPage.
	Refused func(w http.ResponseWriter, r *http.Request, e *Error)
	// SignInPage is the sign-in page's path, for the refusal page's link.
	SignInPage string
}

// ServeHTTP answers BeginPath and CallbackPath; other paths are 404.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != BeginPath && r.URL.Path != CallbackPath {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		h.refuse(w, r, refused(http.StatusMethodNotAllowed, "method", "Method not allowed", "Sign-in pages are reached with GET."))
		return
	}
	if r.URL.Path == BeginPath {
		account := r.URL.Query().Get("account")
		if account == "" || len(account) > 128 {
			h.refuse(w, r, refused(http.StatusBadRequest, "no_account", "Which organization?",
				"The sign-in address names no organization (account=<organization id>). Use the address your admin gave you."))
			return
		}
		if e := h.Service.Begin(w, r, account, CallbackURL(r)); e != nil {
			h.refuse(w, r, e)
		}
		return
	}
	id, e := h.Service.Finish(w, r, CallbackURL(r))
	if e != nil {
		h.refuse(w, r, e)
		return
	}
	h.SignedIn(w, r, id)
}

func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, e *Error) {
	if h.Refused != nil {
		h.Refused(w, r, e)
		return
	}
	WriteErrorPage(w, e, h.SignInPage)
}

// CallbackURL is the callback's absolute URL on the host the request
// came to: the redirect URI registered at the provider.
func CallbackURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + CallbackPath
}
