package record

import (
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// AccountKind distinguishes a personal account from an organization.
type AccountKind string

const (
	AccountPersonal     AccountKind = "personal"
	AccountOrganization AccountKind = "organization"
)

// Billing says how an account pays; only prepaid accounts are subject to the
// in-flight budget.
type Billing string

const (
	BillingPrepaid      Billing = "prepaid"
	BillingEnterprise   Billing = "enterprise"
	BillingSubscription Billing = "subscription"
	BillingInvoiced     Billing = "invoiced"
)

// ParseBilling accepts the billing names above.
func ParseBilling(s string) (Billing, bool) {
	switch b := Billing(s); b {
	case BillingPrepaid, BillingEnterprise, BillingSubscription, BillingInvoiced:
		return b, true
	}
	return "", false
}

// Account is a customer of the gateway: a person or an organization. Keys,
// credits and settings all hang off an account.
//
//codec:binary json=AccountJSON fast
type Account struct {
	ID      string      `json:"id"`
	Name    string      `json:"name"`
	Kind    AccountKind `json:"kind"`
	Billing Billing     `json:"billing"`
	// OwnerUserID is the user that owns a personal account; it is reported as
	// the creator of that account's keys.
	OwnerUserID        string       `json:"owner_user_id,omitempty"`
	DefaultWorkspaceID string       `json:"default_workspace_id"`
	CreditsPurchased   money.Amount `json:"credits_purchased"`
	Purchases          int          `json:"purchases"`
	Usage              money.Amount `json:"usage"`
	BYOKUsage          money.Amount `json:"byok_usage"`
	// RateLimitExempt lifts the free-model request caps.
	RateLimitExempt bool `json:"rate_limit_exempt"`
	// FilteredModelCatalog is the organization setting
	// is_filtered_model_catalog_enabled.
	FilteredModelCatalog bool `json:"filtered_model_catalog"`
	// FreeModelRequests counts today's free-model requests (UTC day);
	// FreeModelMinute the current UTC minute's. Both survive restarts.
	FreeModelRequests money.Windowed `json:"free_model_requests"`
	FreeModelMinute   money.Windowed `json:"free_model_minute"`
	CreatedAt         time.Time      `json:"created_at"`
	UpdatedAt         time.Time      `json:"updated_at"`
	// RateLimits cap the rates of every request of the account; nil: the
	// gateway's defaults.
	RateLimits *RateLimits `json:"rate_limits,omitempty"`
}

// Balance is what the account can still spend.
func (a Account) Balance() money.Amount { return a.CreditsPurchased - a.Usage }

// FreeModelRequestsToday returns the free-model requests counted in now's UTC day.
func (a Account) FreeModelRequestsToday(now time.Time) int64 {
	return int64(a.FreeModelRequests.At(money.IntervalDaily, now))
}

// FreeModelRequestsThisMinute returns the free-model requests counted in
// now's UTC minute.
func (a Account) FreeModelRequestsThisMinute(now time.Time) int64 {
	return int64(a.FreeModelMinute.At(money.IntervalMinute, now))
}

// Purchase is one credit purchase recorded by the operator.
//
//codec:binary fast
type Purchase struct {
	ID        string       `json:"id"`
	AccountID string       `json:"account_id"`
	Amount    money.Amount `json:"amount"`
	Note      string       `json:"note,omitempty"`
	CreatedAt time.Time    `json:"created_at"`
}

// ManagementKey may call the administrative routes of its account only.
//
//codec:binary fast name=MgmtKey
type ManagementKey struct {
	Hash          string     `json:"hash"`
	AccountID     string     `json:"account_id"`
	Name          string     `json:"name"`
	Label         string     `json:"label"`
	CreatorUserID *string    `json:"creator_user_id"`
	CreatedAt     time.Time  `json:"created_at"`
	ExpiresAt     *time.Time `json:"expires_at"`
}

// Expired reports whether the key's fixed expiration has passed at now.
func (k ManagementKey) Expired(now time.Time) bool {
	return k.ExpiresAt != nil && !now.Before(*k.ExpiresAt)
}

// APIKey is a regular key that calls inference routes.
//
//codec:json=APIKeyJSON fast gjson
type APIKey struct {
	Hash               string         `json:"hash"`
	AccountID          string         `json:"account_id"`
	WorkspaceID        string         `json:"workspace_id"`
	Name               string         `json:"name"`
	Label              string         `json:"label"`
	Disabled           bool           `json:"disabled"`
	Limit              *money.Amount  `json:"limit"`
	LimitReset         money.Interval `json:"limit_reset"`
	IncludeBYOKInLimit bool           `json:"include_byok_in_limit"`
	CreatorUserID      *string        `json:"creator_user_id"`
	ExternalUser       *string        `json:"external_user"`
	CreatedAt          time.Time      `json:"created_at"`
	UpdatedAt          time.Time      `json:"updated_at"`
	ExpiresAt          *time.Time     `json:"expires_at"`
	// Seq orders keys of an account by creation even within one clock tick.
	Seq       uint64              `json:"seq"`
	Usage     money.UsageCounters `json:"usage"`
	BYOKUsage money.UsageCounters `json:"byok_usage"`
	// LimitByAdmin: an organization admin (or the account's management
	// key) set the key's limit; DisabledByAdmin: one disabled it. Those
	// are an admin's to change, not the key's member's (CheckKeyChange).
	LimitByAdmin    bool `json:"limit_by_admin,omitempty"`
	DisabledByAdmin bool `json:"disabled_by_admin,omitempty"`
	// Connect is the app the key was provisioned for through the connect
	// flow; nil for keys created otherwise. Such a key is
	// its member's: management keys cannot change or delete it.
	Connect *ConnectApp `json:"connect,omitempty"`
	// RateLimits cap the key's request and token rates; nil: none.
	RateLimits *RateLimits `json:"rate_limits,omitempty"`
}

// Expired reports whether the key's expiration has passed at now.
func (k APIKey) Expired(now time.Time) bool {
	return k.ExpiresAt != nil && !now.Before(*k.ExpiresAt)
}

// CapUsage is the spending that counts against the key's cap at now: the
// current reset period's usage, plus BYOK usage when the key includes it.
func (k APIKey) CapUsage(now time.Time) money.Amount {
	used := k.Usage.In(k.LimitReset, now)
	if k.IncludeBYOKInLimit {
		used = money.SpendingSum(used, k.BYOKUsage.In(k.LimitReset, now))
	}
	return used
}

// LimitRemaining is what is left under the cap at now, never below zero; nil
// means unlimited.
func (k APIKey) LimitRemaining(now time.Time) *money.Amount {
	if k.Limit == nil {
		return nil
	}
	rem := *k.Limit - k.CapUsage(now)
	if rem < 0 {
		rem = 0
	}
	return &rem
}

// Key string prefixes make a leaked key recognizable to secret scanners.
const (
	APIKeyPrefix        = "sk-tg-v1-"
	ManagementKeyPrefix = "sk-tg-mgmt-v1-"
)

// ConnectApp is the app a key was provisioned for through the connect
// flow: its name and the origin of its callback URL, which is what the
// member saw when approving.
type ConnectApp struct {
	ID     int64  `json:"id"`
	Name   string `json:"name"`
	Origin string `json:"origin"`
}
