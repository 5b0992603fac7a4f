package record

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// Workspace divides an account's keys. Every account has a default
// workspace (Account.DefaultWorkspaceID), which cannot be deleted and whose
// members are implicitly all of the organization's members.
//
//codec:binary fast
type Workspace struct {
	ID                              string     `json:"id"`
	AccountID                       string     `json:"account_id"`
	Name                            string     `json:"name"`
	Slug                            string     `json:"slug"`
	Description                     *string    `json:"description"`
	CreatedBy                       *string    `json:"created_by"`
	DefaultGuardrailID              string     `json:"default_guardrail_id"`
	DefaultImageModel               *string    `json:"default_image_model"`
	DefaultProviderSort             *string    `json:"default_provider_sort"`
	DefaultTextModel                *string    `json:"default_text_model"`
	DisabledServerTools             []string   `json:"disabled_server_tools"`
	IOLoggingAPIKeyIDs              []int64    `json:"io_logging_api_key_ids"`
	IOLoggingSamplingRate           float64    `json:"io_logging_sampling_rate"`
	IsDataDiscountLoggingEnabled    bool       `json:"is_data_discount_logging_enabled"`
	IsObservabilityBroadcastEnabled bool       `json:"is_observability_broadcast_enabled"`
	IsObservabilityIOLoggingEnabled bool       `json:"is_observability_io_logging_enabled"`
	IncludeBYOKInBudgets            bool       `json:"include_byok_in_budgets"`
	CreatedAt                       time.Time  `json:"created_at"`
	UpdatedAt                       *time.Time `json:"updated_at"`
	// Budgets by interval: daily, weekly, monthly, or lifetime.
	Budgets map[BudgetInterval]*WorkspaceBudget `json:"budgets,omitempty"`
	// Members by user id (explicit memberships; the default workspace's
	// are implicit).
	Members map[string]*WorkspaceMember `json:"members,omitempty"`
	// RateLimits cap the pooled rates of every key of the workspace; nil:
	// none.
	RateLimits *RateLimits `json:"rate_limits,omitempty"`
	// Usage is the spending of every key of the workspace (persisted in
	// its own record by the store).
	Usage     money.UsageCounters `json:"-"`
	BYOKUsage money.UsageCounters `json:"-"`
}

// WorkspaceMember is a member's membership in a workspace.
type WorkspaceMember struct {
	UserID    string     `json:"user_id"`
	Role      MemberRole `json:"role"`
	CreatedAt time.Time  `json:"created_at"`
}

// MembershipID is the stable public id of a user's membership in a
// workspace (a UUID derived from both ids).
func MembershipID(workspaceID, userID string) string {
	sum := sha256.Sum256([]byte(workspaceID + "/" + userID))
	sum[6] = sum[6]&0x0f | 0x50
	sum[8] = sum[8]&0x3f | 0x80
	h := hex.EncodeToString(sum[:16])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// BudgetInterval is a workspace budget's period; BudgetLifetime never resets.
type BudgetInterval string

const (
	BudgetDaily    BudgetInterval = "daily"
	BudgetWeekly   BudgetInterval = "weekly"
	BudgetMonthly  BudgetInterval = "monthly"
	BudgetLifetime BudgetInterval = "lifetime"
)

// BudgetOrder lists the intervals from the narrowest to the widest: limits
// must strictly increase along it.
var BudgetOrder = []BudgetInterval{BudgetDaily, BudgetWeekly, BudgetMonthly, BudgetLifetime}

// ParseBudgetInterval accepts daily, weekly, monthly and lifetime.
func ParseBudgetInterval(s string) (BudgetInterval, bool) {
	for _, iv := range BudgetOrder {
		if string(iv) == s {
			return iv, true
		}
	}
	return "", false
}

// Interval is the usage window of the budget (IntervalNone: all time).
func (b BudgetInterval) Interval() money.Interval {
	if b == BudgetLifetime {
		return money.IntervalNone
	}
	return money.Interval(b)
}

// WorkspaceBudget caps a workspace's pooled spending over an interval.
type WorkspaceBudget struct {
	ID        string         `json:"id"`
	Interval  BudgetInterval `json:"interval"`
	Limit     money.Amount   `json:"limit"`
	CreatedAt time.Time      `json:"created_at"`
	UpdatedAt time.Time      `json:"updated_at"`
}

// BudgetUsage is the workspace's spending that counts against budgets of
// the interval at now.
func (w *Workspace) BudgetUsage(iv BudgetInterval, now time.Time) money.Amount {
	used := w.Usage.In(iv.Interval(), now)
	if w.IncludeBYOKInBudgets {
		used = money.SpendingSum(used, w.BYOKUsage.In(iv.Interval(), now))
	}
	return used
}

// SortedBudgets returns the budgets from the narrowest interval.
func (w *Workspace) SortedBudgets() []WorkspaceBudget {
	var out []WorkspaceBudget
	for _, iv := range BudgetOrder {
		if b, ok := w.Budgets[iv]; ok {
			out = append(out, *b)
		}
	}
	return out
}

// Clone copies the workspace with its own maps. Callers hold the kernel's lock.
func (w *Workspace) Clone() *Workspace {
	c := *w
	c.Budgets = maps.Clone(w.Budgets)
	c.Members = maps.Clone(w.Members)
	if c.Budgets == nil {
		c.Budgets = map[BudgetInterval]*WorkspaceBudget{}
	}
	if c.Members == nil {
		c.Members = map[string]*WorkspaceMember{}
	}
	return &c
}

// RecordIDs names the workspace's account and the workspace.
func (w Workspace) RecordIDs() (accountID, id string) { return w.AccountID, w.ID }

// MemberRole is a member's role in its organization, and a workspace
// member's role in its workspace.
type MemberRole string

const (
	RoleAdmin  MemberRole = "admin"
	RoleMember MemberRole = "member"
)

// ParseMemberRole accepts admin and member.
func ParseMemberRole(s string) (MemberRole, bool) {
	switch r := MemberRole(s); r {
	case RoleAdmin, RoleMember:
		return r, true
	}
	return "", false
}

// Member is a user of an organization. Members are managed by the operator
// (and by an identity provider through SCIM): created, updated and
// deactivated by email; a deactivated member keeps its id (keys and
// assignments still name it) but is no longer listed and cannot be added
// to workspaces.
type Member struct {
	ID        string     `json:"id"` // user id, "user_..."
	AccountID string     `json:"account_id"`
	Email     string     `json:"email"`
	FirstName *string    `json:"first_name"`
	LastName  *string    `json:"last_name"`
	Role      MemberRole `json:"role"`
	Active    bool       `json:"active"`
	// Usage is the spending of every key the member created: guardrail
	// budgets assigned to the member cap it (persisted in its own record by
	// the store).
	Usage     money.UsageCounters `json:"-"`
	BYOKUsage money.UsageCounters `json:"-"`
	CreatedAt time.Time           `json:"created_at"`
	UpdatedAt time.Time           `json:"updated_at"`
}

// RecordIDs names the member's account and the member.
func (m Member) RecordIDs() (accountID, id string) { return m.AccountID, m.ID }
