package dashboard

import (
	"net/http"
	"strings"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// pageRoutes registers the pages, each behind RequireSession.
func (d *Dashboard) pageRoutes() {
	page := func(pattern string, h func(w http.ResponseWriter, r *http.Request, s Session)) {
		// The account's pages need a session of an account (an operator's
		// alone has none).
		account := !strings.Contains(pattern, " /operator") && pattern != "GET /{$}"
		d.Handle(pattern, RequireSession(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s, _ := SessionFrom(r)
			if account && s.AccountID == "" {
				d.errorPage(w, r, http.StatusForbidden, "No account", "This session is the operator's only: it has no account's pages.")
				return
			}
			h(w, r, s)
		})))
	}
	page("GET /{$}", d.overview)
	d.accountRoutes(page)
	d.operatorRoutes(page)
}

// nearLimit is the share of a key's limit past which the overview lists it.
const nearLimit = 0.8

type keyUse struct {
	Key       storage.APIKey
	Used      money.Amount
	Limit     money.Amount
	Percent   int
	BarClass  string
	Remaining money.Amount
}

func useOf(k storage.APIKey, t time.Time) keyUse {
	u := keyUse{Key: k, Used: k.CapUsage(t)}
	if k.Limit != nil {
		u.Limit = *k.Limit
		if rem := k.LimitRemaining(t); rem != nil {
			u.Remaining = *rem
		}
		if u.Limit > 0 {
			u.Percent = int(min(100, u.Used.Float64()/u.Limit.Float64()*100))
		} else {
			u.Percent = 100
		}
		switch {
		case u.Percent >= 100:
			u.BarClass = "full"
		case float64(u.Percent) >= nearLimit*100:
			u.BarClass = "high"
		}
	}
	return u
}

type overviewData struct {
	Prefix                   string
	Account                  storage.Account
	Balance                  money.Amount
	Today, Week, Month       money.Amount
	Chart                    chartSVG
	NearLimit                []keyUse
	NearLimitMore            int
	CanManage, IsOrg, Member bool
}

// overview shows the account's money and recent spend.
func (d *Dashboard) overview(w http.ResponseWriter, r *http.Request, s Session) {
	if s.AccountID == "" {
		http.Redirect(w, r, d.Prefix+"/operator", http.StatusSeeOther)
		return
	}
	st, acct, ok := d.account(w, r, s)
	if !ok {
		return
	}
	t := now().UTC()
	data := overviewData{Prefix: d.Prefix, Account: acct, Balance: acct.Balance(), CanManage: s.CanManageAccount(),
		IsOrg: acct.Kind == storage.AccountOrganization, Member: s.Role == RoleMember}
	// 31 days: the month's start is at most 30 days back, so one pass
	// over the rollup gives the chart's 30 days and the month.
	var mine []storage.UsageFilter
	if !s.CanManageAccount() {
		// A member's spend is their keys'.
		mine = []storage.UsageFilter{{Dim: storage.DimUser, Values: []string{s.MemberID}}}
	}
	days := dailySpend(st, acct.ID, t, 31, mine)
	weekStart, monthStart := storage.BucketStart(t, storage.GranularityWeek), storage.BucketStart(t, storage.GranularityMonth)
	today := storage.BucketStart(t, storage.GranularityDay)
	for _, p := range days {
		if !p.Day.Before(today) {
			data.Today += p.Usage
		}
		if !p.Day.Before(weekStart) {
			data.Week += p.Usage
		}
		if !p.Day.Before(monthStart) {
			data.Month += p.Usage
		}
	}
	days = days[1:]
	data.Chart = barChart(days, func(p dayPoint) float64 { return p.Usage.Float64() }, moneyAxis)
	var near []keyUse
	for _, k := range d.visibleKeys(st, s, acct, "") {
		if k.Limit == nil {
			continue
		}
		if u := useOf(k, t); float64(u.Percent) >= nearLimit*100 {
			near = append(near, u)
		}
	}
	if len(near) > 10 {
		data.NearLimitMore = len(near) - 10
		near = near[:10]
	}
	data.NearLimit = near
	d.page(w, r, http.StatusOK, acct.Name, "overview", "overview", data)
}

// account loads the session's account; a page that says so when it is gone.
func (d *Dashboard) account(w http.ResponseWriter, r *http.Request, s Session) (*storage.Store, storage.Account, bool) {
	st, err := d.gatewayStore()
	if err != nil {
		d.errorPage(w, r, http.StatusServiceUnavailable, "The gateway's database is unavailable", "Retry in a moment.")
		return nil, storage.Account{}, false
	}
	acct, ok := st.Account(s.AccountID)
	if !ok {
		d.errorPage(w, r, http.StatusNotFound, "Account not found", "The account of this session no longer exists.")
		return nil, storage.Account{}, false
	}
	return st, acct, true
}

// visibleKeys are the API keys a session sees, most recent first: every
// key of the account (of one workspace when workspaceID is set) for an
// owner or admin, a member's own keys for a member.
func (d *Dashboard) visibleKeys(st *storage.Store, s Session, acct storage.Account, workspaceID string) []storage.APIKey {
	keys := st.ListAPIKeys(storage.KeyFilter{AccountID: acct.ID, WorkspaceID: workspaceID, IncludeDisabled: true})
	if s.CanManageAccount() {
		return keys
	}
	own := keys[:0]
	for _, k := range keys {
		if k.CreatorUserID != nil && *k.CreatorUserID == s.MemberID {
			own = append(own, k)
		}
	}
	return own
}

// dayPoint is one UTC day's figures.
type dayPoint struct {
	Day                  time.Time
	Usage                money.Amount
	Requests             int64
	PromptTokens, Tokens int64
}

// dailySpend is the account's figures per UTC day over the n days to t,
// from the analytics rollup (filters narrow it), oldest first, every day
// present.
func dailySpend(st *storage.Store, accountID string, t time.Time, n int, filters []storage.UsageFilter) []dayPoint {
	today := storage.BucketStart(t, storage.GranularityDay)
	from := today.AddDate(0, 0, -(n - 1))
	out := make([]dayPoint, n)
	for i := range out {
		out[i].Day = from.AddDate(0, 0, i)
	}
	rows, _ := st.QueryUsage(accountID, storage.UsageQuery{From: from, To: today.AddDate(0, 0, 1), Granularity: storage.GranularityDay, Filters: filters})
	for _, row := range rows {
		i := int(row.Bucket.Sub(from) / (24 * time.Hour))
		if i < 0 || i >= n {
			continue
		}
		out[i].Usage += row.Sums.Usage
		out[i].Requests += row.Sums.Requests
		out[i].PromptTokens += row.Sums.PromptTokens
		out[i].Tokens += row.Sums.PromptTokens + row.Sums.CompletionTokens
	}
	return out
}
