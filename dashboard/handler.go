package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/admin"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

func init() {
	caddy.RegisterModule(new(Dashboard))
	httpcaddyfile.RegisterHandlerDirective(Directive, parseCaddyfile)
}

// Directive is the dashboard's Caddyfile directive.
const Directive = "tollgate_dashboard"

// DefaultPrefix is where the dashboard is served without a prefix of its
// own.
const DefaultPrefix = "/dashboard"

// Defaults of the options.
const (
	DefaultSessionTTL     = 12 * time.Hour
	DefaultSignInAttempts = 10 // per client IP and minute
)

// Dashboard serves the dashboard under Prefix; other requests go on to
// next. See the package documentation.
type Dashboard struct {
	// Prefix is the path the dashboard is served under. Default
	// DefaultPrefix.
	Prefix string `json:"prefix,omitempty"`
	// SessionTTL is how long a session lasts from sign-in. Default
	// DefaultSessionTTL.
	SessionTTL caddy.Duration `json:"session_ttl,omitempty"`
	// SignInAttempts caps sign-in attempts per client IP and minute.
	// Default DefaultSignInAttempts.
	SignInAttempts int `json:"signin_attempts,omitempty"`

	gw       gateway.Gateway
	admin    *admin.Admin
	operator http.Handler // the operator API, in process; nil without
	logger   *zap.Logger
	mux      *http.ServeMux
	limiter  *attemptLimiter
	// signIn are the sign-in methods besides the link, shown on the
	// sign-in page (AddSignInOption).
	signIn []SignInOption
	// choices caches the Activity page's filter choices.
	choicesMu sync.Mutex
	choices   map[choiceKey]*filterChoices
}

// CaddyModule returns the Caddy module information.
func (*Dashboard) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers." + Directive,
		New: func() caddy.Module { return new(Dashboard) },
	}
}

// OperatorAPI is what the tollgate app offers the dashboard's operator
// pages: the operator API's handler, called in process so that a page's
// action is the operator route's own code.
type OperatorAPI interface {
	OperatorHandler() http.Handler
}

// Extension adds to every provisioned dashboard (a sign-in method's
// routes, a page); register it from an init with RegisterExtension.
type Extension func(d *Dashboard) error

var (
	extMu      sync.Mutex
	extensions []Extension
)

// RegisterExtension adds ext to every dashboard provisioned from now on.
func RegisterExtension(ext Extension) {
	extMu.Lock()
	defer extMu.Unlock()
	extensions = append(extensions, ext)
}

// SignInOption is a sign-in method the sign-in page offers besides the
// link: a button that leads to Path (below the prefix).
type SignInOption struct {
	Label string
	Path  string
}

// AddSignInOption shows a sign-in method on the sign-in page; call it
// from an Extension.
func (d *Dashboard) AddSignInOption(o SignInOption) { d.signIn = append(d.signIn, o) }

// Handle serves pattern (an http.ServeMux pattern whose path is below
// the prefix, e.g. "GET /oidc/callback") with h; call it from an
// Extension. h runs with the dashboard in its request context, so that
// StartSession, SessionFrom, RequireSession and Render work.
func (d *Dashboard) Handle(pattern string, h http.Handler) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = "", pattern
	}
	d.mux.Handle(strings.TrimSpace(method+" "+d.Prefix+path), h)
}

// Logger is the dashboard's logger, for extensions.
func (d *Dashboard) Logger() *zap.Logger { return d.logger }

// Gateway is the tollgate app, for extensions.
func (d *Dashboard) Gateway() gateway.Gateway { return d.gw }

// Provision finds the tollgate app and sets up the routes.
func (d *Dashboard) Provision(ctx caddy.Context) error {
	gw, err := gateway.Load(ctx)
	if err != nil {
		return err
	}
	return d.setup(gw, ctx.Logger())
}

// setup is Provision with the gateway given (tests).
func (d *Dashboard) setup(gw gateway.Gateway, logger *zap.Logger) error {
	if err := d.Validate(); err != nil {
		return err // before the prefix makes the routes' patterns
	}
	if d.Prefix == "" {
		d.Prefix = DefaultPrefix
	}
	d.Prefix = strings.TrimSuffix(d.Prefix, "/")
	if d.SessionTTL == 0 {
		d.SessionTTL = caddy.Duration(DefaultSessionTTL)
	}
	if d.SignInAttempts == 0 {
		d.SignInAttempts = DefaultSignInAttempts
	}
	d.gw, d.logger = gw, logger
	d.admin = admin.New(gw, logger, nil)
	if op, ok := gw.(OperatorAPI); ok {
		d.operator = op.OperatorHandler()
	}
	d.limiter = newAttemptLimiter(d.SignInAttempts, time.Minute)

	d.mux = http.NewServeMux()
	d.routes()
	extMu.Lock()
	exts := append([]Extension(nil), extensions...)
	extMu.Unlock()
	for _, ext := range exts {
		if err := ext(d); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks the options.
func (d *Dashboard) Validate() error {
	if d.Prefix != "" && (!strings.HasPrefix(d.Prefix, "/") || d.Prefix == "/") {
		return fmt.Errorf("prefix: must start with / and name a path, got %q", d.Prefix)
	}
	if d.SessionTTL < 0 {
		return fmt.Errorf("session_ttl: must be positive")
	}
	if d.SignInAttempts < 0 {
		return fmt.Errorf("signin_attempts: must be positive")
	}
	return nil
}

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	p := r.URL.Path
	if p != d.Prefix && !strings.HasPrefix(p, d.Prefix+"/") {
		return next.ServeHTTP(w, r)
	}
	if p == d.Prefix {
		http.Redirect(w, r, d.Prefix+"/", http.StatusMovedPermanently)
		return nil
	}
	setSecurityHeaders(w.Header())
	if st, err := d.gw.Store(); err == nil {
		// The recent generations are indexed from the first visit of any
		// page (the store is not opened by Provision).
		recentOf(st, d.logger)
	}
	r = r.WithContext(context.WithValue(r.Context(), ctxDashboard, d))
	if !safeMethod(r.Method) {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		// The form is read once, here, so that every handler (and the CSRF
		// check) sees either the whole form or an answer that says why not.
		if err := r.ParseForm(); err != nil {
			if _, tooBig := errors.AsType[*http.MaxBytesError](err); tooBig {
				d.errorPage(w, r, http.StatusRequestEntityTooLarge, "The form is too large",
					"Nothing was changed. A form may carry at most 1 MiB.")
				return nil
			}
			d.errorPage(w, r, http.StatusBadRequest, "The form could not be read",
				"Nothing was changed. Send the form again from the page.")
			return nil
		}
		if st, err := d.gw.Store(); err == nil && (!st.Available() || !st.Synced()) {
			d.errorPage(w, r, http.StatusServiceUnavailable, "The gateway's database is unavailable",
				"Nothing was changed. Retry in a moment.")
			return nil
		}
	}
	d.mux.ServeHTTP(w, r)
	return nil
}

// maxFormBytes bounds a form's body.
const maxFormBytes = 1 << 20

// setSecurityHeaders sets the headers of every dashboard answer: a
// strict Content-Security-Policy (scripts and styles from the dashboard's
// own files only, no inline code), no framing, no referrer (a sign-in
// link's token never leaves in a Referer), no caching of pages that show
// keys.
func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
}

// store is the dashboard store; nil only if the database cannot open,
// which gateway requests report as well.
func (d *Dashboard) store() *Store {
	st, err := d.gw.Store()
	if err != nil {
		return nil
	}
	return StoreOf(st)
}

// gatewayStore is the gateway's store.
func (d *Dashboard) gatewayStore() (*storage.Store, error) { return d.gw.Store() }

func (d *Dashboard) sessionTTL() time.Duration { return time.Duration(d.SessionTTL) }

// cookie is the session cookie with value until expires.
func (d *Dashboard) cookie(r *http.Request, value string, expires time.Time) *http.Cookie {
	return &http.Cookie{
		Name: CookieName, Value: value, Path: d.Prefix + "/", Expires: expires,
		HttpOnly: true, Secure: viaHTTPS(r), SameSite: http.SameSiteLaxMode,
	}
}

// viaHTTPS reports whether the browser reached the gateway over HTTPS:
// TLS ended at Caddy, or the request came from one of the server's
// trusted_proxies (as Caddy decided for the request) saying so in
// X-Forwarded-Proto. From any other client the header is ignored: it
// could be anyone's.
func viaHTTPS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if trusted, _ := caddyhttp.GetVar(r.Context(), caddyhttp.TrustedProxyVarKey).(bool); !trusted {
		return false
	}
	// The first value is the scheme the first proxy was reached with.
	proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	return strings.EqualFold(strings.TrimSpace(proto), "https")
}

// sessionFields are the log fields of a session: who, never the cookie.
func sessionFields(s Session, r *http.Request) []zap.Field {
	return []zap.Field{zap.String("account_id", s.AccountID), zap.String("member_id", s.MemberID),
		zap.String("role", string(s.Role)), zap.Bool("operator", s.Operator),
		zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.String("remote_ip", clientIP(r))}
}

// clientIP is the request's client address as Caddy determined it
// (trusted proxies applied), else the connection's.
func clientIP(r *http.Request) string {
	if v, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string); ok && v != "" {
		return v
	}
	host := r.RemoteAddr
	if i := strings.LastIndexByte(host, ':'); i > 0 {
		host = host[:i]
	}
	return strings.Trim(host, "[]")
}

// parseCaddyfile parses
//
//	tollgate_dashboard [<prefix>] {
//		session_ttl     <duration>
//		signin_attempts <per minute>
//	}
func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	d := new(Dashboard)
	err := d.UnmarshalCaddyfile(h.Dispenser)
	return d, err
}

// UnmarshalCaddyfile implements caddyfile.Unmarshaler.
func (d *Dashboard) UnmarshalCaddyfile(disp *caddyfile.Dispenser) error {
	disp.Next() // directive name
	if disp.NextArg() {
		d.Prefix = disp.Val()
		if disp.NextArg() {
			return disp.ArgErr()
		}
	}
	for disp.NextBlock(0) {
		switch disp.Val() {
		case "session_ttl":
			var s string
			if !disp.AllArgs(&s) {
				return disp.ArgErr()
			}
			v, err := caddy.ParseDuration(s)
			if err != nil || v <= 0 {
				return disp.Errf("session_ttl: invalid duration %q", s)
			}
			d.SessionTTL = caddy.Duration(v)
		case "signin_attempts":
			var s string
			if !disp.AllArgs(&s) {
				return disp.ArgErr()
			}
			var n int
			if _, err := fmt.Sscan(s, &n); err != nil || n <= 0 {
				return disp.Errf("signin_attempts: expected a positive integer, got %q", s)
			}
			d.SignInAttempts = n
		default:
			return disp.Errf("unrecognized %s option %q (expected session_ttl or signin_attempts)", Directive, disp.Val())
		}
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Dashboard)(nil)
	_ caddy.Validator             = (*Dashboard)(nil)
	_ caddyhttp.MiddlewareHandler = (*Dashboard)(nil)
	_ caddyfile.Unmarshaler       = (*Dashboard)(nil)
)

// AllowSignIn counts a sign-in attempt from r's client address and
// reports whether it is within signin_attempts a minute; a sign-in method
// refuses the attempt (429) when it is not.
func (d *Dashboard) AllowSignIn(r *http.Request) bool { return d.limiter.allow(clientIP(r), now()) }

// ErrorPage writes the dashboard's page of a refused request: its title
// and what to do, in the layout, with status.
func (d *Dashboard) ErrorPage(w http.ResponseWriter, r *http.Request, status int, title, detail string) {
	d.errorPage(w, r, status, title, detail)
}

// ReturnTo is p when it is a page of this dashboard (never another site,
// nor the sign-in page), else the home page: where to go after a sign-in.
func (d *Dashboard) ReturnTo(p string) string { return d.returnTo(p) }
