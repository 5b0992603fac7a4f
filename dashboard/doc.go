// Package dashboard is the gateway's web dashboard: people of an account
// (an organization's members with their roles, a personal account's
// owner) and the gateway's operator sign in and manage keys, credits,
// usage, members and settings in a browser. It is the Caddy handler
// module http.handlers.tollgate_dashboard (Caddyfile directive
// tollgate_dashboard [<prefix>]), served by the gateway's own Caddy under
// a path prefix (default /dashboard), from templates and assets embedded
// in the binary: server-rendered pages, a few lines of script for
// progressive enhancement, charts drawn as SVG on the server, and a strict
// Content-Security-Policy (no inline script or style, nothing from another
// origin).
//
// # Sessions
//
// A session is a record of the gateway's store (this package's domain
// store, registered with storage.RegisterDomain), so replicas on one
// Redis share it. Its cookie (CookieName: 256 random bits; the store
// keeps only its SHA-256) is HttpOnly, SameSite=Lax, Secure over TLS
// (TLS at Caddy, or a trusted proxy's X-Forwarded-Proto: https) and
// scoped to the prefix; a session lasts session_ttl from sign-in (default
// 12h) and ends at sign-out. A session records who signed in, not what
// they may do: every request reads the member's record again (on a
// database replicas share, the record there), so a demoted admin is a
// member at the next request, and deactivating a member (by an admin, the
// operator or SCIM) ends every session of theirs at once. The API for
// other sign-in methods and pages:
//
//   - Principal is who signs in: AccountID, MemberID (empty for the
//     account's owner), Operator, Method; the store fills Role (RoleOwner,
//     RoleAdmin, RoleMember, RoleOperator) from the member's record as it
//     is at each request.
//   - StartSession(w, r, p) checks p (the account exists, the member is
//     active), ends the request's previous session (a new id at each
//     sign-in), stores the new one and sets its cookie.
//   - SessionFrom(r) returns the request's live session; SignOut(w, r)
//     ends it.
//   - RequireSession(h) serves h only to a signed-in request (others are
//     redirected to <prefix>/signin?return_to=<page>) and refuses a
//     state-changing request without the session's CSRF token (403, a
//     page that says nothing changed).
//   - CSRFField(r) is the hidden form field of that token (field
//     csrf_token), CSRFToken(r) its value for a script's X-CSRF-Token
//     header; CheckCSRF checks one. The token is derived from the session
//     cookie, so it is bound to the session and stored nowhere.
//   - Render(w, r, Page) writes a page in the dashboard's layout (header,
//     navigation for the session, stylesheet); ExecuteBody renders a
//     template of the caller's into a Page's Body.
//   - RegisterExtension(func(*Dashboard) error), from an init, runs at
//     each dashboard's Provision: Dashboard.Handle mounts a route below the
//     prefix (its handler runs with the dashboard in its request context,
//     so the functions above work), AddSignInOption shows a sign-in method
//     on the sign-in page, AllowSignIn applies the sign-in rate limit,
//     ReturnTo checks where to go after sign-in (the return_to of
//     RequireSession's redirect), ErrorPage writes a refusal's page.
//
// These functions work on requests the dashboard serves (its handler puts
// itself in the request context).
//
// # Sign-in links
//
// The operator issues one-time sign-in links (POST /tollgate/signin-links
// on the operator API, `caddy tollgate signin-link`): the store keeps the
// token's hash and the principal; opening the link shows a button that
// POSTs the token (a GET changes nothing, so a link scanner cannot use it
// up); the first POST deletes the link and starts the session. On Redis,
// a SET NX on the link's hash makes that first use atomic across
// replicas. A used, expired or forged link gets a page that says so; the
// log records the refusal and the client address, never the token.
// Sign-in attempts are capped per client address (signin_attempts per
// minute, default 10).
//
// # Actions
//
// Every change a page makes goes through the code of the API route that
// makes it: the account's management routes through
// admin.Admin.ServeForAccount, the operator's through the operator API's
// handler in process (OperatorAPI), so a rule and its error message have
// one implementation; the dashboard adds only which role may ask for what.
// A member's calls go through admin.Admin.ServeForMember, so that what an
// admin set on the member's key (its limit, its disable) is refused to
// them by the route's own rule. A POST that changes something answers
// with a redirect; a new key is shown by the page it redirects to, once,
// from a flash stored sealed under a random id bound to the session.
package dashboard
