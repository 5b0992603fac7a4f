package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// routes registers the dashboard's own routes.
func (d *Dashboard) routes() {
	d.mux.Handle("GET "+d.Prefix+"/static/", d.staticHandler())
	d.Handle("GET /signin", http.HandlerFunc(d.signInPage))
	d.Handle("POST /signin", http.HandlerFunc(d.signInWithLink))
	d.Handle("POST /signout", RequireSession(http.HandlerFunc(d.signOut)))
	d.pageRoutes()
	d.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.errorPage(w, r, http.StatusNotFound, "Page not found", "There is no page at "+r.URL.Path+".")
	}))
}

// signInData is the sign-in page's.
type signInData struct {
	Prefix   string
	Token    string
	ReturnTo string
	Options  []SignInOption
}

// signInPage shows the sign-in page. With a link's token it asks for one
// click, which POSTs it: a GET changes nothing, so a mail scanner or a
// link preview that fetches the link does not use it up.
func (d *Dashboard) signInPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	data := signInData{Prefix: d.Prefix, Token: q.Get("token"), ReturnTo: d.returnTo(q.Get("return_to")), Options: d.signIn}
	d.page(w, r, http.StatusOK, "Sign in", "", "signin", data)
}

// signInWithLink uses a sign-in link's token and starts a session.
func (d *Dashboard) signInWithLink(w http.ResponseWriter, r *http.Request) {
	ip := clientIP(r)
	if !d.limiter.allow(ip, now()) {
		d.logger.Warn("dashboard sign-in refused: too many attempts", zap.String("remote_ip", ip))
		w.Header().Set("Retry-After", "60")
		d.errorPage(w, r, http.StatusTooManyRequests, "Too many sign-in attempts",
			"Wait a minute, then use your sign-in link again.")
		return
	}
	if !sameOrigin(r) {
		d.logger.Warn("dashboard sign-in refused: from another site", zap.String("remote_ip", ip))
		d.errorPage(w, r, http.StatusForbidden, "Sign-in refused",
			"This sign-in did not come from this dashboard's page. Open your sign-in link again.")
		return
	}
	st := d.store()
	if st == nil {
		d.errorPage(w, r, http.StatusServiceUnavailable, "The gateway's database is unavailable", "Retry in a moment.")
		return
	}
	p, err := st.ConsumeLink(strings.TrimSpace(r.PostFormValue("token")))
	if err != nil {
		// The token is never logged: only that a link failed, and why.
		switch {
		case errors.Is(err, ErrLinkExpired):
			d.logger.Info("dashboard sign-in refused: link expired", zap.String("remote_ip", ip))
			d.errorPage(w, r, http.StatusGone, "This sign-in link has expired",
				"Sign-in links work once, for a short time. Ask your gateway's operator for a new one.")
		case errors.Is(err, ErrLinkInvalid):
			d.logger.Info("dashboard sign-in refused: link not valid", zap.String("remote_ip", ip))
			d.errorPage(w, r, http.StatusBadRequest, "This sign-in link is not valid",
				"It was already used, or it was never issued. Sign-in links work once; ask your gateway's operator for a new one.")
		default:
			d.logger.Error("dashboard sign-in failed", zap.String("remote_ip", ip), zap.Error(err))
			d.errorPage(w, r, http.StatusServiceUnavailable, "Sign-in failed", "The gateway could not sign you in. Retry in a moment.")
		}
		return
	}
	s, err := StartSession(w, r, p)
	if err != nil {
		d.logger.Error("dashboard session could not start", zap.String("remote_ip", ip), zap.Error(err))
		d.errorPage(w, r, http.StatusServiceUnavailable, "Sign-in failed", "The gateway could not sign you in. Retry in a moment.")
		return
	}
	d.logger.Info("dashboard sign-in", sessionFields(s, r)...)
	http.Redirect(w, r, d.returnTo(r.PostFormValue("return_to")), http.StatusSeeOther)
}

// returnTo is where to go after sign-in: a path of the dashboard, never
// another site ("//host", "/\host"); else the home page.
func (d *Dashboard) returnTo(p string) string {
	if strings.HasPrefix(p, d.Prefix+"/") && !strings.ContainsAny(p, "\\\r\n") && !strings.HasPrefix(p, "//") &&
		!strings.HasPrefix(p, d.Prefix+"/signin") {
		return p
	}
	return d.Prefix + "/"
}

func (d *Dashboard) signOut(w http.ResponseWriter, r *http.Request) {
	s, _ := SessionFrom(r)
	if err := SignOut(w, r); err != nil {
		d.logger.Error("dashboard sign-out failed", zap.Error(err))
		d.errorPage(w, r, http.StatusServiceUnavailable, "Sign-out failed", "Retry in a moment.")
		return
	}
	d.logger.Info("dashboard sign-out", sessionFields(s, r)...)
	http.Redirect(w, r, d.Prefix+"/signin?signed_out=1", http.StatusSeeOther)
}

// attemptLimiter caps sign-in attempts per client IP in fixed windows.
type attemptLimiter struct {
	mu     sync.Mutex
	max    int
	window time.Duration
	seen   map[string]attempts
}

type attempts struct {
	start time.Time
	n     int
}

func newAttemptLimiter(max int, window time.Duration) *attemptLimiter {
	return &attemptLimiter{max: max, window: window, seen: map[string]attempts{}}
}

// allow counts an attempt from ip at t and reports whether it is within
// the cap.
func (l *attemptLimiter) allow(ip string, t time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.seen) > 100_000 { // bound memory under a spray of addresses
		for k, a := range l.seen {
			if t.Sub(a.start) >= l.window {
				delete(l.seen, k)
			}
		}
	}
	a := l.seen[ip]
	if t.Sub(a.start) >= l.window {
		a = attempts{start: t}
	}
	a.n++
	l.seen[ip] = a
	return a.n <= l.max
}

// IssueLink is the operator API's sign-in link: it stores a one-time link
// for the principal and returns its token and the link's path below the
// site (the dashboard at prefix, DefaultPrefix when empty).
func IssueLink(st *storage.Store, p Principal, ttl time.Duration, prefix string) (token, path string, link Link, err error) {
	ds := StoreOf(st)
	if ds == nil {
		return "", "", Link{}, fmt.Errorf("dashboard store not registered")
	}
	token, link, err = ds.IssueLink(p, ttl)
	if err != nil {
		return "", "", Link{}, err
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return token, strings.TrimSuffix(prefix, "/") + "/signin?token=" + token, link, nil
}

// formatMoney shows credits as dollars: cents, or more digits for small
// amounts.
func formatMoney(a money.Amount) string {
	f := a.Float64()
	switch {
	case f == 0:
		return "$0.00"
	case f >= 1 || f <= -1:
		return fmt.Sprintf("$%.2f", f)
	case f >= 0.01 || f <= -0.01:
		return fmt.Sprintf("$%.4f", f)
	}
	return fmt.Sprintf("$%.6f", f)
}
