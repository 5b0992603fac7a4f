package oidc

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"go.uber.org/zap"
	"golang.org/x/oauth2"

	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// The sign-in flow (OpenID Connect's authorization code flow):
//
//   - Begin draws a state, a nonce and a PKCE verifier, keeps them in a
//     short-lived cookie sealed with the gateway's key (AES-256-GCM: it
//     cannot be read or forged by the browser) and scoped to the callback
//     path, and redirects to the provider's authorization endpoint with
//     the state, the nonce and the verifier's S256 challenge.
//   - Finish, at the callback, opens the cookie (so that the callback
//     comes from the browser that began: no login CSRF), checks the state,
//     uses it once, exchanges the code with the client secret and the
//     verifier, verifies the ID token with go-oidc (signature by the
//     provider's published keys, issuer, audience, expiry) and its nonce,
//     then matches the identity to a member of the organization.
//
// Nothing is written to the store until the dashboard starts the session.

// The dashboard's sign-in routes, below its prefix (/dashboard by
// default): Begin at SignInPath?account=<organization id>, the provider's
// callback (the redirect URI registered at the provider) at CallbackPath.
const (
	SignInPath   = "/signin/oidc"
	CallbackPath = SignInPath + "/callback"
)

// FlowTTL is how long a begun sign-in may take at the identity provider.
const FlowTTL = 10 * time.Minute

// FlowCookie is the name of the cookie that carries a begun sign-in.
const FlowCookie = "tollgate_oidc_flow"

// flowAD keeps a flow cookie from opening as any other sealed value.
var flowAD = []byte("tollgate-oidc-flow-v1")

// Scopes are asked of the provider: the subject, and the email to match
// members by.
var Scopes = []string{gooidc.ScopeOpenID, "email", "profile"}

// Service runs the sign-in flow for every organization of a store.
type Service struct {
	store  *storage.Store
	sealer *storage.Sealer
	log    *zap.Logger
	client *http.Client
	provs  providers
}

// The states used, until their flow expires: one set per process, so
// that a config reload (a new Service) does not forget them.
var (
	usedMu sync.Mutex
	used   = map[string]time.Time{}
)

// Options configure a Service.
type Options struct {
	Store *storage.Store
	// Sealer is the gateway's byok_encryption_key: it opens the client
	// secrets and seals the flow cookies. Nil: every sign-in is refused
	// with a page saying so.
	Sealer *storage.Sealer
	Logger *zap.Logger
	// HTTPClient calls the providers; default NewHTTPClient().
	HTTPClient *http.Client
}

// NewService returns the sign-in service of a store.
func NewService(o Options) *Service {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.HTTPClient == nil {
		o.HTTPClient = NewHTTPClient()
	}
	return &Service{
		store: o.Store, sealer: o.Sealer, log: o.Logger, client: o.HTTPClient,
		provs: providers{client: o.HTTPClient, byAcct: map[string]*cachedProvider{}},
	}
}

// Identity is a person the provider signed in, matched to a member.
type Identity struct {
	AccountID string
	MemberID  string
	Role      storage.MemberRole
	Email     string
	// Subject is the provider's id of the person (the ID token's sub).
	Subject string
	// Match says how the member was found: "external_id" (the SCIM
	// user's externalId is the subject), "user_name" (the SCIM user's
	// userName is the verified email) or "email" (the member's email).
	Match string
}

// Error is a refused or failed sign-in: the status and the sentences of
// the page the person sees. It never carries a code, token or secret.
type Error struct {
	Status  int
	Title   string
	Message string
	// Reason is a short machine word for the log (e.g. "state_mismatch").
	Reason string
}

func (e *Error) Error() string { return e.Title + ": " + e.Message }

func refused(status int, reason, title, message string) *Error {
	return &Error{Status: status, Title: title, Message: message, Reason: reason}
}

// errStartAgain ends a callback that cannot be tied to a sign-in begun in
// this browser.
func errStartAgain(reason, why string) *Error {
	return refused(http.StatusBadRequest, reason, "Sign-in could not be completed",
		why+" Start the sign-in again from the sign-in page.")
}

// flow is what a flow cookie carries.
type flow struct {
	Account  string `json:"a"`
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Redirect string `json:"r"`
	Expires  int64  `json:"e"` // unix seconds
}

func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand failed: " + err.Error()) // never happens on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// oauthConfig is the OAuth 2.0 client of an organization.
func oauthConfig(c Config, p *gooidc.Provider, secret, redirectURL string) *oauth2.Config {
	return &oauth2.Config{ClientID: c.ClientID, ClientSecret: secret, Endpoint: p.Endpoint(), RedirectURL: redirectURL, Scopes: Scopes}
}

// config returns an organization's settings, or the page for an account
// that cannot sign in through a provider.
func (s *Service) config(accountID string) (Config, *Error) {
	if s.sealer == nil {
		return Config{}, refused(http.StatusServiceUnavailable, "no_key", "Identity provider sign-in is off",
			"This gateway has no encryption key (byok_encryption_key), which identity provider sign-in needs. Ask the gateway's operator.")
	}
	c, ok := StoreOf(s.store).Config(accountID)
	if !ok {
		return Config{}, refused(http.StatusNotFound, "not_configured", "No identity provider",
			"This organization does not sign in through an identity provider. Ask its admin for a sign-in link.")
	}
	return c, nil
}

// Begin starts an organization's sign-in: it sets the flow cookie (path:
// the callback's) and redirects to the provider. redirectURL is the
// callback's absolute URL, as registered at the provider.
func (s *Service) Begin(w http.ResponseWriter, r *http.Request, accountID, redirectURL string) *Error {
	c, e := s.config(accountID)
	if e != nil {
		return s.fail(r, accountID, e)
	}
	p, err := s.provs.get(r.Context(), c)
	if err != nil {
		s.log.Warn("identity provider discovery failed", zap.String("account_id", accountID), zap.String("issuer", c.Issuer), zap.String("error", shortError(err)))
		return s.fail(r, accountID, errProviderDown())
	}
	f := flow{Account: accountID, State: randomToken(), Nonce: randomToken(), Verifier: oauth2.GenerateVerifier(),
		Redirect: redirectURL, Expires: now().Add(FlowTTL).Unix()}
	b, _ := json.Marshal(f)
	u, err := url.Parse(redirectURL)
	if err != nil || u.Path == "" {
		return s.fail(r, accountID, refused(http.StatusInternalServerError, "bad_redirect", "Sign-in is misconfigured", "The gateway's callback address is not a URL."))
	}
	http.SetCookie(w, &http.Cookie{
		Name: FlowCookie, Value: base64.RawURLEncoding.EncodeToString(s.sealer.Seal(b, flowAD)),
		// Secure when the browser comes back over HTTPS (TLS at Caddy, or
		// a trusted proxy's: the caller's callback address says which).
		Path: u.Path, MaxAge: int(FlowTTL / time.Second), HttpOnly: true, Secure: r.TLS != nil || u.Scheme == "https",
		// Lax: the provider sends the browser back with a top-level GET
		// from its own site, which Strict would strip the cookie from.
		SameSite: http.SameSiteLaxMode,
	})
	dest := oauthConfig(c, p, "", redirectURL).AuthCodeURL(f.State, gooidc.Nonce(f.Nonce), oauth2.S256ChallengeOption(f.Verifier))
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, dest, http.StatusFound)
	return nil
}

func errProviderDown() *Error {
	return refused(http.StatusBadGateway, "provider_unreachable", "Your identity provider could not be reached",
		"The gateway could not reach your organization's identity provider. Try again in a moment; if it persists, ask your admin.")
}

// Finish completes a sign-in at the callback: redirectURL is the same as
// Begin's. It clears the flow cookie whatever the outcome.
func (s *Service) Finish(w http.ResponseWriter, r *http.Request, redirectURL string) (Identity, *Error) {
	ck, _ := r.Cookie(FlowCookie)
	if u, err := url.Parse(redirectURL); err == nil {
		http.SetCookie(w, &http.Cookie{Name: FlowCookie, Value: "", Path: u.Path, MaxAge: -1, HttpOnly: true, Secure: r.TLS != nil || u.Scheme == "https", SameSite: http.SameSiteLaxMode})
	}
	w.Header().Set("Cache-Control", "no-store")
	if s.sealer == nil {
		_, e := s.config("")
		return Identity{}, s.fail(r, "", e)
	}
	var f flow
	if ck == nil {
		return Identity{}, s.fail(r, "", errStartAgain("no_flow_cookie", "This browser did not begin this sign-in (or its cookie expired)."))
	}
	raw, err := base64.RawURLEncoding.DecodeString(ck.Value)
	if err == nil {
		raw, err = s.sealer.Open(raw, flowAD)
	}
	if err == nil {
		err = json.Unmarshal(raw, &f)
	}
	if err != nil {
		return Identity{}, s.fail(r, "", errStartAgain("bad_flow_cookie", "This sign-in's cookie is not one the gateway issued."))
	}
	q := r.URL.Query()
	if now().Unix() > f.Expires {
		return Identity{}, s.fail(r, f.Account, errStartAgain("flow_expired", "This sign-in took longer than 10 minutes."))
	}
	state := q.Get("state")
	if subtle.ConstantTimeCompare([]byte(state), []byte(f.State)) != 1 {
		return Identity{}, s.fail(r, f.Account, errStartAgain("state_mismatch", "The identity provider's answer does not belong to the sign-in this browser began."))
	}
	if f.Redirect != redirectURL {
		return Identity{}, s.fail(r, f.Account, errStartAgain("redirect_mismatch", "This sign-in was begun at another address."))
	}
	if !useState(f.State, time.Unix(f.Expires, 0)) {
		return Identity{}, s.fail(r, f.Account, errStartAgain("state_replayed", "This sign-in answer was already used."))
	}
	if code := q.Get("error"); code != "" {
		return Identity{}, s.fail(r, f.Account, refused(http.StatusForbidden, "provider_refused", "Your identity provider did not sign you in",
			"It answered "+oauthErrorCode(code)+". Try again, or ask your admin whether you may use this application."))
	}
	code := q.Get("code")
	if code == "" {
		return Identity{}, s.fail(r, f.Account, errStartAgain("no_code", "The identity provider's answer carries no authorization code."))
	}
	c, e := s.config(f.Account)
	if e != nil {
		return Identity{}, s.fail(r, f.Account, e)
	}
	id, e := s.exchange(r.Context(), c, f, code)
	if e != nil {
		return Identity{}, s.fail(r, f.Account, e)
	}
	m, e := s.match(c, id)
	if e != nil {
		return Identity{}, s.fail(r, f.Account, e)
	}
	s.log.Info("dashboard sign-in through the identity provider",
		zap.String("account_id", m.AccountID), zap.String("member_id", m.MemberID), zap.String("match", m.Match))
	return m, nil
}

// oauthErrorCode keeps an OAuth error code printable and short; the
// provider's description is not shown (it is the provider's text, of any
// length).
func oauthErrorCode(code string) string {
	if len(code) > 64 {
		code = code[:64]
	}
	for _, c := range code {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return "an error"
		}
	}
	return "“" + code + "”"
}

// useState marks a flow's state used, once: a replayed callback (the same
// state again, within its lifetime) is refused. Per process: across
// replicas the provider's code, which it redeems once, ends a replay.
func useState(state string, expires time.Time) bool {
	usedMu.Lock()
	defer usedMu.Unlock()
	t := now()
	if len(used) > 1024 {
		for k, exp := range used {
			if t.After(exp) {
				delete(used, k)
			}
		}
	}
	if _, ok := used[state]; ok {
		return false
	}
	used[state] = expires
	return true
}

// claims are the ID token's claims the matching reads.
type claims struct {
	Subject         string          `json:"sub"`
	AuthorizedParty string          `json:"azp"`
	Email           string          `json:"email"`
	EmailVerified   json.RawMessage `json:"email_verified"`
}

// verified reads email_verified as a boolean; some providers send the
// string "true".
func (c claims) verified() bool {
	switch string(c.EmailVerified) {
	case "true", `"true"`:
		return true
	}
	return false
}

// exchange redeems the code and verifies the ID token.
func (s *Service) exchange(ctx context.Context, c Config, f flow, code string) (claims, *Error) {
	p, err := s.provs.get(ctx, c)
	if err != nil {
		s.log.Warn("identity provider discovery failed", zap.String("account_id", c.AccountID), zap.String("issuer", c.Issuer), zap.String("error", shortError(err)))
		return claims{}, errProviderDown()
	}
	secret, err := c.ClientSecret(s.sealer)
	if err != nil {
		s.log.Error("the identity provider's client secret cannot be opened with this gateway's byok_encryption_key", zap.String("account_id", c.AccountID))
		return claims{}, refused(http.StatusInternalServerError, "secret_unopenable", "Sign-in is misconfigured",
			"The gateway cannot read this organization's identity provider settings. Ask the gateway's operator.")
	}
	ctx, cancel := context.WithTimeout(gooidc.ClientContext(ctx, s.client), idpTimeout)
	defer cancel()
	tok, err := oauthConfig(c, p, secret, f.Redirect).Exchange(ctx, code, oauth2.VerifierOption(f.Verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500 {
			// The provider refused the code (used, expired, or not for
			// this client): its error code only, never the body.
			s.log.Warn("identity provider refused the authorization code", zap.String("account_id", c.AccountID),
				zap.Int("status", re.Response.StatusCode), zap.String("error_code", re.ErrorCode))
			return claims{}, refused(http.StatusForbidden, "code_refused", "Your identity provider refused the sign-in",
				"It did not accept the sign-in's authorization code (it may have been used already). Start the sign-in again.")
		}
		s.log.Warn("identity provider token exchange failed", zap.String("account_id", c.AccountID), zap.String("error", exchangeError(err)))
		return claims{}, errProviderDown()
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return claims{}, refused(http.StatusBadGateway, "no_id_token", "Your identity provider did not identify you",
			"Its answer carries no ID token; the gateway's client at the provider must be an OpenID Connect client with the openid scope.")
	}
	idt, err := p.Verifier(&gooidc.Config{ClientID: c.ClientID}).Verify(ctx, raw)
	if err != nil {
		var expired *gooidc.TokenExpiredError
		reason := "id_token_invalid"
		if errors.As(err, &expired) {
			reason = "id_token_expired"
		}
		s.log.Warn("ID token refused", zap.String("account_id", c.AccountID), zap.String("reason", reason), zap.String("error", shortError(err)))
		return claims{}, refused(http.StatusForbidden, reason, "Your identity provider's answer was refused",
			"The ID token it sent could not be verified for this gateway (issuer, audience, signature or expiry). Start the sign-in again; if it persists, ask your admin to check the identity provider settings.")
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(f.Nonce)) != 1 {
		s.log.Warn("ID token refused", zap.String("account_id", c.AccountID), zap.String("reason", "nonce_mismatch"))
		return claims{}, refused(http.StatusForbidden, "nonce_mismatch", "Your identity provider's answer was refused",
			"The ID token was not issued for the sign-in this browser began. Start the sign-in again.")
	}
	var cl claims
	if err := idt.Claims(&cl); err != nil || cl.Subject == "" {
		return claims{}, refused(http.StatusForbidden, "id_token_invalid", "Your identity provider's answer was refused",
			"The ID token carries no subject.")
	}
	// A token for several audiences must name this client as the party
	// it was issued to (OpenID Connect Core 3.1.3.7).
	if len(idt.Audience) > 1 && cl.AuthorizedParty != c.ClientID {
		s.log.Warn("ID token refused", zap.String("account_id", c.AccountID), zap.String("reason", "azp_mismatch"))
		return claims{}, refused(http.StatusForbidden, "id_token_invalid", "Your identity provider's answer was refused",
			"The ID token was issued to another application (azp).")
	}
	return cl, nil
}

// exchangeError describes a failed exchange without the request: a
// url.Error names the token endpoint only.
func exchangeError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + " " + ue.URL + ": " + shortError(ue.Err)
	}
	return shortError(err)
}

// fail logs a refused sign-in (its reason, never a code or token) and
// returns it.
func (s *Service) fail(r *http.Request, accountID string, e *Error) *Error {
	s.log.Info("dashboard sign-in through the identity provider refused",
		zap.String("account_id", accountID), zap.String("reason", e.Reason), zap.Int("status", e.Status),
		zap.String("remote_ip", r.RemoteAddr))
	return e
}
