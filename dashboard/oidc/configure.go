package oidc

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// ErrNoSealer: the gateway has no byok_encryption_key, which seals the
// client secrets and the sign-in cookies.
var ErrNoSealer = errors.New("no byok_encryption_key")

// MsgNoSealer is the APIs' 400 for ErrNoSealer.
const MsgNoSealer = "Identity provider sign-in is not configured on this gateway: the operator must set byok_encryption_key, which encrypts the client secret"

// Configure sets an organization's provider (the operator API's PUT): it
// checks the settings (a *FieldError names the
// refused field), reads the provider's discovery document with client (a
// failure is a *FieldError of "issuer") and stores them. An unknown
// account is storage.ErrNotFound; a gateway without a sealer ErrNoSealer.
func Configure(ctx context.Context, st *storage.Store, accountID string, in Settings, sealer *storage.Sealer, client *http.Client) (Config, bool, error) {
	if fe := in.Check(); fe != nil {
		return Config{}, false, fe
	}
	acct, ok := st.Account(accountID)
	if !ok {
		return Config{}, false, storage.ErrNotFound
	}
	if acct.Kind != storage.AccountOrganization {
		return Config{}, false, &FieldError{"account", "only organizations sign in through an identity provider"}
	}
	if sealer == nil {
		return Config{}, false, ErrNoSealer
	}
	if _, has := StoreOf(st).Config(accountID); !has && in.ClientSecret == "" {
		return Config{}, false, &FieldError{"client_secret", "must be a non-empty string"}
	}
	// The provider answers before anything is stored: a wrong issuer is a
	// 400 now, not a failed sign-in later.
	if _, err := Discover(ctx, client, in.Issuer); err != nil {
		return Config{}, false, &FieldError{"issuer", err.Error()}
	}
	return StoreOf(st).Put(accountID, in, sealer)
}

// DashboardPrefix is the dashboard's default path prefix, which the
// sign-in paths of View are below.
const DashboardPrefix = "/dashboard"

// View is an organization's provider as the APIs show it: never the
// secret, only its masked label.
type View struct {
	AccountID      string    `json:"account_id"`
	Issuer         string    `json:"issuer"`
	ClientID       string    `json:"client_id"`
	SecretLabel    string    `json:"client_secret_label"`
	AllowedDomains []string  `json:"allowed_email_domains"`
	SignInPath     string    `json:"signin_path"`
	RedirectPath   string    `json:"redirect_path"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// View returns the API's view of c.
func (c Config) View() View {
	domains := c.AllowedDomains
	if domains == nil {
		domains = []string{}
	}
	return View{AccountID: c.AccountID, Issuer: c.Issuer, ClientID: c.ClientID, SecretLabel: c.SecretLabel,
		AllowedDomains: domains, SignInPath: DashboardPrefix + SignInPath + "?account=" + c.AccountID,
		RedirectPath: DashboardPrefix + CallbackPath, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
}
