package oidc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
)

// Bounds of every call to an identity provider: discovery, keys and the
// code exchange. A provider that hangs or answers megabytes costs a
// sign-in, never the gateway.
const (
	idpTimeout      = 10 * time.Second
	maxIdPBody      = 1 << 20 // discovery documents and key sets are a few KB
	maxIdPRedirects = 3
	// discoveryTTL is how long a provider's discovery document is used
	// before the next sign-in fetches it again (a failed refresh keeps the
	// old one). Its keys are go-oidc's: cached, fetched again when a token
	// names a key the set does not hold.
	discoveryTTL = time.Hour
)

// NewHTTPClient returns the bounded client the package calls identity
// providers with: a timeout per call, few redirects and a cap on answer
// bodies.
func NewHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = 5 * time.Second
	t.ResponseHeaderTimeout = idpTimeout
	t.MaxIdleConnsPerHost = 4
	return &http.Client{
		Timeout:   idpTimeout,
		Transport: limitBody{t},
		CheckRedirect: func(_ *http.Request, via []*http.Request) error {
			if len(via) >= maxIdPRedirects {
				return errors.New("too many redirects")
			}
			return nil
		},
	}
}

// limitBody caps answer bodies at maxIdPBody: a longer one reads as an
// error rather than filling memory (go-oidc reads bodies whole).
type limitBody struct{ rt http.RoundTripper }

func (l limitBody) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.rt.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &cappedBody{rc: resp.Body, left: maxIdPBody}
	return resp, nil
}

type cappedBody struct {
	rc   io.ReadCloser
	left int64
}

var errBodyTooLarge = fmt.Errorf("identity provider answer larger than %d bytes", maxIdPBody)

func (c *cappedBody) Read(p []byte) (int, error) {
	if c.left <= 0 {
		// One more byte tells a body of exactly the cap from a longer one.
		var one [1]byte
		if n, _ := c.rc.Read(one[:]); n > 0 {
			return 0, errBodyTooLarge
		}
		return 0, io.EOF
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.rc.Read(p)
	c.left -= int64(n)
	return n, err
}

func (c *cappedBody) Close() error { return c.rc.Close() }

// Discover fetches an issuer's discovery document with client and checks
// it: the issuer it names is the one asked for (go-oidc), and its
// authorization, token and keys endpoints are https (http only on a
// loopback address) and present. Errors name the field "issuer".
func Discover(ctx context.Context, client *http.Client, issuer string) (*gooidc.Provider, error) {
	ctx, cancel := context.WithTimeout(gooidc.ClientContext(ctx, client), idpTimeout)
	defer cancel()
	p, err := gooidc.NewProvider(ctx, issuer)
	if err != nil {
		var mismatch *gooidc.IssuerMismatchError
		if errors.As(err, &mismatch) {
			return nil, fmt.Errorf("the discovery document names issuer %q, not %q", mismatch.Discovered, mismatch.Provided)
		}
		return nil, fmt.Errorf("its discovery document %s/.well-known/openid-configuration could not be read: %s", trimSlash(issuer), shortError(err))
	}
	var doc struct {
		JWKS string `json:"jwks_uri"`
	}
	if err := p.Claims(&doc); err != nil {
		return nil, fmt.Errorf("its discovery document is not JSON: %v", err)
	}
	ep := p.Endpoint()
	for _, e := range []struct{ name, url string }{
		{"authorization_endpoint", ep.AuthURL}, {"token_endpoint", ep.TokenURL}, {"jwks_uri", doc.JWKS},
	} {
		if e.url == "" {
			return nil, fmt.Errorf("its discovery document has no %s", e.name)
		}
		if _, fe := checkEndpoint(e.name, e.url); fe != nil {
			return nil, fmt.Errorf("its discovery document's %s %s", e.name, fe.Message)
		}
	}
	return p, nil
}

func trimSlash(s string) string {
	for len(s) > 0 && s[len(s)-1] == '/' {
		s = s[:len(s)-1]
	}
	return s
}

// shortError keeps an error's first 200 bytes: go-oidc's carry the
// provider's answer body.
func shortError(err error) string {
	s := err.Error()
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// providers caches each organization's discovered provider (its
// endpoints, and through go-oidc its key set), so that a sign-in costs no
// discovery round trip and page views none at all.
type providers struct {
	client *http.Client
	mu     sync.Mutex
	byAcct map[string]*cachedProvider
}

type cachedProvider struct {
	issuer  string
	fetched time.Time
	p       *gooidc.Provider
}

// get returns the provider of c, discovered at most discoveryTTL ago; a
// failed refresh keeps the one it has (the provider's keys still verify).
func (ps *providers) get(ctx context.Context, c Config) (*gooidc.Provider, error) {
	ps.mu.Lock()
	cur := ps.byAcct[c.AccountID]
	ps.mu.Unlock()
	if cur != nil && cur.issuer == c.Issuer && now().Sub(cur.fetched) < discoveryTTL {
		return cur.p, nil
	}
	p, err := Discover(ctx, ps.client, c.Issuer)
	if err != nil {
		if cur != nil && cur.issuer == c.Issuer {
			return cur.p, nil
		}
		return nil, err
	}
	ps.mu.Lock()
	ps.byAcct[c.AccountID] = &cachedProvider{issuer: c.Issuer, fetched: now(), p: p}
	ps.mu.Unlock()
	return p, nil
}
