// Package oidc is the dashboard's sign-in through an organization's own
// identity provider (OpenID Connect): the organization's provider settings
// (a domain store of package storage, the client secret sealed with the
// gateway's byok_encryption_key), the authorization-code flow with state,
// nonce and PKCE (Begin and Finish), the verification of the ID token by
// github.com/coreos/go-oidc, and the matching of the verified identity to
// a member of the organization (one provisioned by SCIM, or added by an
// admin or the operator).
//
// It does not depend on the dashboard: Finish returns an Identity (the
// account, member and role) and the dashboard starts its session from it.
package oidc

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/textlimit"
)

// now is the package's clock.
var now = time.Now

// domainName registers the store with package storage.
const domainName = "oidc"

func init() {
	storage.RegisterDomain(storage.DomainInfo{
		Name: domainName,
		New:  func(st *storage.Store) storage.Domain { return newStore(st) },
	})
}

// StoreOf returns the OIDC settings store of st.
func StoreOf(st *storage.Store) *Store {
	s, _ := st.Domain(domainName).(*Store)
	return s
}

// prefix keys an organization's settings: oi/<account id>.
const prefix = "oi/"

// Config is an organization's identity provider, as stored. The client
// secret is kept only sealed, bound to the account id.
type Config struct {
	AccountID string `json:"account_id"`
	// Issuer is the provider's issuer URL: https (http only on a loopback
	// address), the base of its discovery document.
	Issuer   string `json:"issuer"`
	ClientID string `json:"client_id"`
	// SealedSecret is the client secret, sealed with the account id as
	// additional data; SecretLabel a masked hint of it.
	SealedSecret []byte `json:"client_secret_sealed"`
	SecretLabel  string `json:"client_secret_label"`
	// AllowedDomains, when set, are the only email domains a person may be
	// matched by email from (lowercase).
	AllowedDomains []string  `json:"allowed_email_domains,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// secretAD binds a sealed client secret to its organization.
func secretAD(accountID string) []byte { return []byte("oidc-client-secret/" + accountID) }

// ClientSecret opens the client secret. Callers keep it only as long as
// the exchange that needs it.
func (c Config) ClientSecret(sealer *storage.Sealer) (string, error) {
	if sealer == nil {
		return "", storage.ErrUnseal
	}
	b, err := sealer.Open(c.SealedSecret, secretAD(c.AccountID))
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// Settings is what the operator sets. An empty ClientSecret keeps the
// stored one (when there is one).
type Settings struct {
	Issuer         string
	ClientID       string
	ClientSecret   string
	AllowedDomains []string
}

// FieldError is a refused setting, naming the field (an API's 400).
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// Check normalizes and checks the settings, without network: the issuer's
// URL (https, or http on a loopback address), the client id and secret
// (bounded text), the email domains.
func (s *Settings) Check() *FieldError {
	iss, fe := checkEndpoint("issuer", s.Issuer)
	if fe != nil {
		return fe
	}
	if u, _ := url.Parse(iss); u.RawQuery != "" || u.Fragment != "" {
		return &FieldError{"issuer", "must not have a query or fragment (the discovery document is at <issuer>/.well-known/openid-configuration)"}
	}
	s.Issuer = iss
	s.ClientID = strings.TrimSpace(s.ClientID)
	if s.ClientID == "" {
		return &FieldError{"client_id", "must be a non-empty string (the client id the identity provider gave the gateway)"}
	}
	if err := textlimit.Check("client_id", s.ClientID); err != nil {
		return &FieldError{"client_id", strings.TrimPrefix(err.Error(), "client_id: ")}
	}
	if len(s.ClientSecret) > 1024 || strings.ContainsFunc(s.ClientSecret, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return &FieldError{"client_secret", "must be at most 1024 characters without control characters"}
	}
	if len(s.AllowedDomains) > 100 {
		return &FieldError{"allowed_email_domains", "at most 100 domains"}
	}
	domains := make([]string, 0, len(s.AllowedDomains))
	for _, d := range s.AllowedDomains {
		d = strings.ToLower(strings.TrimSpace(d))
		if !validDomain(d) {
			return &FieldError{"allowed_email_domains", fmt.Sprintf("%q is not a domain name such as example.com", d)}
		}
		if !slices.Contains(domains, d) {
			domains = append(domains, d)
		}
	}
	s.AllowedDomains = domains
	return nil
}

// checkEndpoint checks an identity provider URL: absolute, https, or http
// on a loopback address only (a test issuer, or a provider on the same
// host): elsewhere the codes and tokens would cross the network in clear.
func checkEndpoint(field, raw string) (string, *FieldError) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", &FieldError{field, "must be a non-empty URL such as https://idp.example.com"}
	}
	if len(raw) > 2048 {
		return "", &FieldError{field, "must be at most 2048 characters"}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil {
		return "", &FieldError{field, "must be an absolute URL such as https://idp.example.com"}
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !isLoopback(u.Hostname()) {
			return "", &FieldError{field, "must use https (http is allowed only on a loopback address)"}
		}
	default:
		return "", &FieldError{field, "must use https"}
	}
	return raw, nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func validDomain(d string) bool {
	if d == "" || len(d) > 253 || !strings.Contains(d, ".") {
		return false
	}
	for _, label := range strings.Split(d, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// Store keeps the organizations' identity provider settings, in memory
// under the kernel's lock and written through the kernel.
type Store struct {
	k       *kernel.Kernel
	org     storage.Locked
	configs map[string]*Config // by account id
}

func newStore(st *storage.Store) *Store {
	return &Store{k: st.Kernel(), org: st.Locked(), configs: map[string]*Config{}}
}

// Kinds is the settings' one kind (storage.Domain). With Remove, another
// replica's change of an organization's settings is applied alone.
func (s *Store) Kinds() []kernel.Kind {
	return []kernel.Kind{{Prefix: prefix, Load: s.load, Reset: s.reset, Snapshot: s.snapshot,
		Remove: func(key string) { delete(s.configs, strings.TrimPrefix(key, prefix)) }}}
}

func (s *Store) load(_, v []byte) error {
	c := new(Config)
	if err := json.Unmarshal(v, c); err != nil {
		return err
	}
	s.configs[c.AccountID] = c
	return nil
}

// reset empties the settings before a full reload from the shared
// database. Callers hold the kernel's lock.
func (s *Store) reset() { clear(s.configs) }

func (s *Store) snapshot(key string) any {
	if c, ok := s.configs[strings.TrimPrefix(key, prefix)]; ok {
		return *c
	}
	return nil
}

// Config returns an organization's settings.
func (s *Store) Config(accountID string) (Config, bool) {
	s.k.RLock()
	defer s.k.RUnlock()
	c, ok := s.configs[accountID]
	if !ok {
		return Config{}, false
	}
	return *c, true
}

// Put creates or replaces an organization's settings, checked by
// Settings.Check, sealing the client secret; it reports whether they were
// created. A personal account is refused (only organizations have
// members to sign in); an empty secret keeps the stored one, and is
// refused when there is none.
func (s *Store) Put(accountID string, in Settings, sealer *storage.Sealer) (Config, bool, error) {
	if sealer == nil {
		return Config{}, false, fmt.Errorf("%w: the gateway has no byok_encryption_key to seal the client secret with", storage.ErrInvalid)
	}
	if fe := in.Check(); fe != nil {
		return Config{}, false, fmt.Errorf("%w: %s", storage.ErrInvalid, fe.Error())
	}
	s.k.Lock()
	acct, ok := s.org.Account(accountID)
	if !ok {
		s.k.Unlock()
		return Config{}, false, storage.ErrNotFound
	}
	if acct.Kind != storage.AccountOrganization {
		s.k.Unlock()
		return Config{}, false, fmt.Errorf("%w: only organizations sign in through an identity provider", storage.ErrInvalid)
	}
	t := now().UTC()
	c := Config{AccountID: accountID, CreatedAt: t}
	cur, exists := s.configs[accountID]
	if exists {
		c = *cur
	}
	c.Issuer, c.ClientID, c.AllowedDomains, c.UpdatedAt = in.Issuer, in.ClientID, in.AllowedDomains, t
	switch {
	case in.ClientSecret != "":
		c.SealedSecret = sealer.Seal([]byte(in.ClientSecret), secretAD(accountID))
		c.SecretLabel = maskSecret(in.ClientSecret)
	case !exists:
		s.k.Unlock()
		return Config{}, false, fmt.Errorf("%w: client_secret: must be a non-empty string", storage.ErrInvalid)
	}
	s.configs[accountID] = &c
	b := s.k.MarkDirty(prefix + accountID)
	s.k.Unlock()
	return c, !exists, b.Wait()
}

// Delete removes an organization's settings: its members no longer sign
// in through the identity provider.
func (s *Store) Delete(accountID string) error {
	s.k.Lock()
	if _, ok := s.configs[accountID]; !ok {
		s.k.Unlock()
		return storage.ErrNotFound
	}
	delete(s.configs, accountID)
	b := s.k.MarkDirty(prefix + accountID)
	s.k.Unlock()
	return b.Wait()
}

// maskSecret shows at most the last four characters of a long secret.
func maskSecret(secret string) string {
	if len(secret) < 16 {
		return "****"
	}
	return "****" + secret[len(secret)-4:]
}
