package admin

import (
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// apiTime renders timestamps as ISO 8601 in UTC with up to millisecond
// precision, so a time a JavaScript client sent comes back unchanged.
func apiTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.999Z07:00") }

func apiTimePtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := apiTime(*t)
	return &s
}

func intervalPtr(iv money.Interval) *string {
	if iv == money.IntervalNone {
		return nil
	}
	s := string(iv)
	return &s
}

// keyView is the API key record as the public API answers it, with every
// field its schema requires.
type keyView struct {
	Hash               string        `json:"hash"`
	Name               string        `json:"name"`
	Label              string        `json:"label"`
	Disabled           bool          `json:"disabled"`
	Limit              *money.Amount `json:"limit"`
	LimitRemaining     *money.Amount `json:"limit_remaining"`
	LimitReset         *string       `json:"limit_reset"`
	IncludeBYOKInLimit bool          `json:"include_byok_in_limit"`
	counterView
	CreatedAt     string  `json:"created_at"`
	UpdatedAt     *string `json:"updated_at"`
	ExpiresAt     *string `json:"expires_at"`
	CreatorUserID *string `json:"creator_user_id"`
	ExternalUser  *string `json:"external_user"`
	WorkspaceID   string  `json:"workspace_id"`
	// Connect is the app a key was provisioned for through the connect
	// flow (its member is creator_user_id); absent for other keys.
	Connect *connectAppView `json:"connect,omitempty"`
	// RateLimits are the key's rate limits; absent when it sets none.
	RateLimits *rateLimitsView `json:"rate_limits,omitempty"`
}

// connectAppView is the app of a key provisioned through the connect flow.
type connectAppView struct {
	AppID  int64  `json:"app_id"`
	Name   string `json:"name"`
	Origin string `json:"origin"`
}

// counterView is the usage counters of a key as of a moment.
type counterView struct {
	Usage            money.Amount `json:"usage"`
	UsageDaily       money.Amount `json:"usage_daily"`
	UsageWeekly      money.Amount `json:"usage_weekly"`
	UsageMonthly     money.Amount `json:"usage_monthly"`
	BYOKUsage        money.Amount `json:"byok_usage"`
	BYOKUsageDaily   money.Amount `json:"byok_usage_daily"`
	BYOKUsageWeekly  money.Amount `json:"byok_usage_weekly"`
	BYOKUsageMonthly money.Amount `json:"byok_usage_monthly"`
}

func countersAt(k storage.APIKey, t time.Time) counterView {
	return counterView{
		Usage:            k.Usage.Total,
		UsageDaily:       k.Usage.In(money.IntervalDaily, t),
		UsageWeekly:      k.Usage.In(money.IntervalWeekly, t),
		UsageMonthly:     k.Usage.In(money.IntervalMonthly, t),
		BYOKUsage:        k.BYOKUsage.Total,
		BYOKUsageDaily:   k.BYOKUsage.In(money.IntervalDaily, t),
		BYOKUsageWeekly:  k.BYOKUsage.In(money.IntervalWeekly, t),
		BYOKUsageMonthly: k.BYOKUsage.In(money.IntervalMonthly, t),
	}
}

func newKeyView(k storage.APIKey, t time.Time) keyView {
	updated := apiTime(k.UpdatedAt)
	return keyView{
		Hash: k.Hash, Name: k.Name, Label: k.Label, Disabled: k.Disabled,
		Limit: k.Limit, LimitRemaining: k.LimitRemaining(t), LimitReset: intervalPtr(k.LimitReset),
		IncludeBYOKInLimit: k.IncludeBYOKInLimit,
		counterView:        countersAt(k, t),
		CreatedAt:          apiTime(k.CreatedAt), UpdatedAt: &updated, ExpiresAt: apiTimePtr(k.ExpiresAt),
		CreatorUserID: k.CreatorUserID, ExternalUser: k.ExternalUser, WorkspaceID: k.WorkspaceID,
		Connect: connectView(k.Connect), RateLimits: newRateLimitsView(k.RateLimits),
	}
}

func connectView(a *storage.ConnectApp) *connectAppView {
	if a == nil {
		return nil
	}
	return &connectAppView{AppID: a.ID, Name: a.Name, Origin: a.Origin}
}

// freeModelDailyView is free_model_daily_requests of GET /key.
type freeModelDailyView struct {
	Used      int64 `json:"used"`
	Limit     int64 `json:"limit"`
	Remaining int64 `json:"remaining"`
}

// rateLimitView is the deprecated rate_limit object of GET /key; clients
// ignore it, but the public schema still requires it.
type rateLimitView struct {
	Requests int    `json:"requests"`
	Interval string `json:"interval"`
	Note     string `json:"note"`
}

// currentKeyView is the answer of GET /key: the calling key.
type currentKeyView struct {
	Label              string        `json:"label"`
	Limit              *money.Amount `json:"limit"`
	LimitRemaining     *money.Amount `json:"limit_remaining"`
	LimitReset         *string       `json:"limit_reset"`
	IncludeBYOKInLimit bool          `json:"include_byok_in_limit"`
	counterView
	IsFreeTier             bool               `json:"is_free_tier"`
	IsManagementKey        bool               `json:"is_management_key"`
	IsProvisioningKey      bool               `json:"is_provisioning_key"`
	FreeModelDailyRequests freeModelDailyView `json:"free_model_daily_requests"`
	RateLimit              rateLimitView      `json:"rate_limit"`
	CreatorUserID          *string            `json:"creator_user_id"`
	ExpiresAt              *string            `json:"expires_at"`
	OrganizationID         *string            `json:"organization_id"`
	WorkspaceID            *string            `json:"workspace_id"`
	AllowedDataRegions     []string           `json:"allowed_data_regions"`
	// RateLimits are the key's rate limits, each with what is left of it;
	// absent when the key sets none.
	RateLimits map[string]rateLeftView `json:"rate_limits,omitempty"`
}

// orgSettingsView is the organization settings record of GET and PATCH
// /organization/settings.
type orgSettingsView struct {
	ID                            string `json:"id"`
	IsFilteredModelCatalogEnabled bool   `json:"is_filtered_model_catalog_enabled"`
}
