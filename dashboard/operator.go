package dashboard

import (
	"net/http"
	"net/url"
	"sort"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// The operator pages: every account with its credits, spend and balance,
// credit top-ups (the operator API's POST /tollgate/accounts/{id}/credits)
// and one account's spend. Only a session from a link issued with
// --operator sees them.

func (d *Dashboard) operatorRoutes(page pageFunc) {
	page("GET /operator", d.operatorAccounts)
	page("GET /operator/accounts/{id}", d.operatorAccount)
	page("POST /operator/accounts/{id}/credits", d.topUp)
}

type operatorRow struct {
	Account storage.Account
	Balance money.Amount
	Month   money.Amount
}

type operatorData struct {
	Prefix   string
	Accounts []operatorRow
	Form     url.Values
	Errors   formErrors
	ErrorFor string
	Saved    string
}

func (d *Dashboard) requireOperator(w http.ResponseWriter, r *http.Request, s Session) bool {
	if s.Operator {
		return true
	}
	d.forbidden(w, r, s, "use the operator pages")
	return false
}

func (d *Dashboard) operatorAccounts(w http.ResponseWriter, r *http.Request, s Session) {
	d.renderOperator(w, r, s, http.StatusOK, operatorData{})
}

func (d *Dashboard) renderOperator(w http.ResponseWriter, r *http.Request, s Session, status int, data operatorData) {
	if !d.requireOperator(w, r, s) {
		return
	}
	st, err := d.gatewayStore()
	if err != nil {
		d.errorPage(w, r, http.StatusServiceUnavailable, "The gateway's database is unavailable", "Retry in a moment.")
		return
	}
	data.Prefix, data.Saved = d.Prefix, r.URL.Query().Get("saved")
	if data.Form == nil {
		data.Form = url.Values{}
	}
	t := now().UTC()
	monthStart := storage.BucketStart(t, storage.GranularityMonth)
	for _, a := range st.Accounts() {
		row := operatorRow{Account: a, Balance: a.Balance()}
		rows, _ := st.QueryUsage(a.ID, storage.UsageQuery{From: monthStart, To: t.Add(time.Hour)})
		for _, x := range rows {
			row.Month += x.Sums.Usage
		}
		data.Accounts = append(data.Accounts, row)
	}
	sort.Slice(data.Accounts, func(i, j int) bool {
		return data.Accounts[i].Account.CreatedAt.After(data.Accounts[j].Account.CreatedAt)
	})
	d.page(w, r, status, "Operator: accounts", "operator", "operator", data)
}

// topUp records a credit purchase through the operator API.
func (d *Dashboard) topUp(w http.ResponseWriter, r *http.Request, s Session) {
	if !d.requireOperator(w, r, s) {
		return
	}
	id := r.PathValue("id")
	body := map[string]any{"amount": jsonNumber(r.PostFormValue("amount"))}
	if v := r.PostFormValue("note"); v != "" {
		body["note"] = v
	}
	a := d.callOperator(r, http.MethodPost, "/tollgate/accounts/"+url.PathEscape(id)+"/credits", body)
	d.logAction(r, s, "add credits to "+id, a)
	if !a.ok() {
		d.renderOperator(w, r, s, a.Status, operatorData{Form: r.PostForm, Errors: fieldError(a.Err, "amount", "note"), ErrorFor: id})
		return
	}
	http.Redirect(w, r, d.Prefix+"/operator?saved="+url.QueryEscape(id), http.StatusSeeOther)
}

type operatorAccountData struct {
	Prefix  string
	Account storage.Account
	Balance money.Amount
	Chart   chartSVG
	Models  []groupRow
	Total   money.Amount
}

// operatorAccount shows one account's spend over 30 days by model.
func (d *Dashboard) operatorAccount(w http.ResponseWriter, r *http.Request, s Session) {
	if !d.requireOperator(w, r, s) {
		return
	}
	st, err := d.gatewayStore()
	if err != nil {
		d.errorPage(w, r, http.StatusServiceUnavailable, "The gateway's database is unavailable", "Retry in a moment.")
		return
	}
	acct, ok := st.Account(r.PathValue("id"))
	if !ok {
		d.errorPage(w, r, http.StatusNotFound, "Account not found", "No account has the id "+r.PathValue("id")+".")
		return
	}
	t := now().UTC()
	days := dailySpend(st, acct.ID, t, 30, nil)
	data := operatorAccountData{Prefix: d.Prefix, Account: acct, Balance: acct.Balance(),
		Chart: barChart(days, func(p dayPoint) float64 { return p.Usage.Float64() }, moneyAxis)}
	rows, _ := st.QueryUsage(acct.ID, storage.UsageQuery{From: days[0].Day, To: t.Add(time.Hour), GroupBy: []string{storage.DimModel}})
	for _, row := range rows {
		g := groupRow{Value: row.Dims[0], Label: row.Dims[0], Sums: row.Sums, Usage: row.Sums.Usage, Tokens: row.Sums.PromptTokens + row.Sums.CompletionTokens}
		data.Models = append(data.Models, g)
		data.Total += row.Sums.Usage
	}
	sort.Slice(data.Models, func(i, j int) bool { return data.Models[i].Usage > data.Models[j].Usage })
	d.page(w, r, http.StatusOK, "Operator: "+acct.Name, "operator", "operatoraccount", data)
}
