// Package testissuer is an OpenID Connect provider for tests: discovery,
// keys (RS256), an authorization endpoint that signs in the person the
// test chose at once, and a token endpoint as strict as a real one (the
// client's secret, the code once, its redirect URI, the PKCE verifier).
// Tests change the next ID token's claims to forge what a broken or
// hostile provider would send.
package testissuer

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// User is the person the authorization endpoint signs in.
type User struct {
	Subject       string
	Email         string
	EmailVerified bool
}

// Issuer is a running test provider.
type Issuer struct {
	// URL is the issuer (the server's base URL).
	URL          string
	ClientID     string
	ClientSecret string

	srv *httptest.Server
	key *rsa.PrivateKey
	kid string

	mu    sync.Mutex
	user  User
	edit  func(claims map[string]any)
	codes map[string]grant
	// Exchanges counts the token endpoint's successful exchanges.
	exchanges int
}

type grant struct {
	redirect  string
	nonce     string
	challenge string
	user      User
	edit      func(map[string]any)
}

// New starts a provider for one client on a loopback port; the test's
// cleanup stops it.
func New(t testing.TB, clientID, clientSecret string) *Issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &Issuer{ClientID: clientID, ClientSecret: clientSecret, key: key, kid: "test-key-1", codes: map[string]grant{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", is.discovery)
	mux.HandleFunc("GET /keys", is.keys)
	mux.HandleFunc("GET /authorize", is.authorize)
	mux.HandleFunc("POST /token", is.token)
	is.srv = httptest.NewServer(mux)
	is.URL = is.srv.URL
	t.Cleanup(is.srv.Close)
	return is
}

// Close stops the provider (a provider that is down).
func (is *Issuer) Close() { is.srv.Close() }

// SignIn sets the person the next authorizations sign in.
func (is *Issuer) SignIn(u User) {
	is.mu.Lock()
	is.user, is.edit = u, nil
	is.mu.Unlock()
}

// EditClaims changes the ID tokens of the next authorizations just before
// they are signed (e.g. another aud, an exp in the past, another nonce).
func (is *Issuer) EditClaims(edit func(claims map[string]any)) {
	is.mu.Lock()
	is.edit = edit
	is.mu.Unlock()
}

// Exchanges is how many codes the token endpoint redeemed.
func (is *Issuer) Exchanges() int {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.exchanges
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (is *Issuer) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                is.URL,
		"authorization_endpoint":                is.URL + "/authorize",
		"token_endpoint":                        is.URL + "/token",
		"jwks_uri":                              is.URL + "/keys",
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
	})
}

func (is *Issuer) keys(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: &is.key.PublicKey, KeyID: is.kid, Algorithm: string(jose.RS256), Use: "sig"},
	}})
}

func randomString() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// authorize checks the request as a provider does, signs in the chosen
// person and sends the browser back with a code and the state.
func (is *Issuer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	fail := func(msg string) { http.Error(w, msg, http.StatusBadRequest) }
	switch {
	case q.Get("response_type") != "code":
		fail("response_type must be code")
		return
	case q.Get("client_id") != is.ClientID:
		fail("unknown client_id")
		return
	case !strings.Contains(" "+q.Get("scope")+" ", " openid "):
		fail("scope must include openid")
		return
	case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		fail("PKCE S256 is required")
		return
	case q.Get("state") == "" || q.Get("nonce") == "":
		fail("state and nonce are required")
		return
	}
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || !redirect.IsAbs() {
		fail("redirect_uri must be absolute")
		return
	}
	code := randomString()
	is.mu.Lock()
	is.codes[code] = grant{redirect: q.Get("redirect_uri"), nonce: q.Get("nonce"), challenge: q.Get("code_challenge"), user: is.user, edit: is.edit}
	is.mu.Unlock()
	back := redirect.Query()
	back.Set("code", code)
	back.Set("state", q.Get("state"))
	redirect.RawQuery = back.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

// token redeems a code once, for the client that authenticates with its
// secret (basic or in the form), with the same redirect URI and the
// verifier of the code's challenge.
func (is *Issuer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request"})
		return
	}
	id, secret, ok := r.BasicAuth()
	if ok {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != is.ClientID || secret != is.ClientSecret {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	if r.PostForm.Get("grant_type") != "authorization_code" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	is.mu.Lock()
	g, ok := is.codes[r.PostForm.Get("code")]
	delete(is.codes, r.PostForm.Get("code"))
	is.mu.Unlock()
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	if !ok || g.redirect != r.PostForm.Get("redirect_uri") || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
		return
	}
	t := time.Now()
	claims := map[string]any{
		"iss": is.URL, "aud": is.ClientID, "sub": g.user.Subject, "nonce": g.nonce,
		"iat": t.Unix(), "exp": t.Add(5 * time.Minute).Unix(),
		"email": g.user.Email, "email_verified": g.user.EmailVerified,
	}
	if g.edit != nil {
		g.edit(claims)
	}
	idToken, err := is.sign(claims)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "server_error"})
		return
	}
	is.mu.Lock()
	is.exchanges++
	is.mu.Unlock()
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": randomString(), "token_type": "Bearer", "expires_in": 300, "id_token": idToken,
	})
}

func (is *Issuer) sign(claims map[string]any) (string, error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: is.key, KeyID: is.kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}
