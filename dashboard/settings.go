package dashboard

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// The settings pages: the organization's settings, workspaces with their
// budgets, rate limits and members, guardrails, BYOK keys and observability
// destinations. Owners and admins change everything; a member sees the
// workspaces they belong to and, where they are a workspace admin, adds
// members to it (as the public API lets a workspace admin).

func (d *Dashboard) settingsRoutes(page pageFunc) {
	page("GET /settings", d.settings)
	page("POST /settings/organization", d.updateOrg)
	page("POST /settings/workspaces", d.createWorkspace)
	page("POST /settings/workspaces/{ref}/budgets", d.setBudget)
	page("POST /settings/workspaces/{ref}/members", d.addWorkspaceMembers)
	page("POST /settings/workspaces/{ref}/rate-limits", d.setWorkspaceRateLimits)
	page("POST /settings/guardrails", d.createGuardrail)
	page("POST /settings/guardrails/{id}/delete", d.deleteResource("/guardrails/", "delete guardrail"))
	page("POST /settings/byok", d.createBYOK)
	page("POST /settings/byok/{id}/delete", d.deleteResource("/byok/", "delete BYOK key"))
	page("POST /settings/observability", d.createDestination)
	page("POST /settings/observability/{id}/delete", d.deleteResource("/observability/destinations/", "delete observability destination"))
}

type budgetView struct {
	Interval     storage.BudgetInterval
	Limit, Spent money.Amount
}

type wsView struct {
	storage.Workspace
	Budgets      []budgetView
	Rates        []wsRate
	HasRates     bool
	Members      []storage.Member
	CanAddMember bool
	Candidates   []storage.Member
}

// wsRate is one of a workspace's rate limits in its form: its value ("":
// none), or what was posted with the error the API gave it.
type wsRate struct {
	rateField
	Value, Err string
}

type settingsData struct {
	Prefix       string
	Account      storage.Account
	IsOrg        bool
	CanManage    bool
	Workspaces   []wsView
	Guardrails   []gjson.Result
	GuardOff     string // why the guardrails could not be listed
	BYOK         []gjson.Result
	BYOKOff      string
	Destinations []gjson.Result
	DestOff      string
	Section      string // the form an error belongs to
	Form         url.Values
	Errors       formErrors
	Saved        string
	Intervals    []string
}

// settings shows the settings the session may see.
func (d *Dashboard) settings(w http.ResponseWriter, r *http.Request, s Session) {
	d.renderSettings(w, r, s, http.StatusOK, "", nil, nil)
}

func (d *Dashboard) renderSettings(w http.ResponseWriter, r *http.Request, s Session, status int, section string, form url.Values, errs formErrors) {
	st, acct, ok := d.account(w, r, s)
	if !ok {
		return
	}
	data := settingsData{Prefix: d.Prefix, Account: acct, IsOrg: acct.Kind == storage.AccountOrganization, CanManage: s.CanManageAccount(),
		Section: section, Form: form, Errors: errs, Saved: r.URL.Query().Get("saved"),
		Intervals: []string{"daily", "weekly", "monthly", "lifetime"}}
	if data.Form == nil {
		data.Form = url.Values{}
	}
	members := map[string]storage.Member{}
	var all []storage.Member
	if data.IsOrg {
		all = st.Members(acct.ID)
		for _, m := range all {
			members[m.ID] = m
		}
	}
	for _, ws := range st.Workspaces(acct.ID) {
		role := ws.Members[s.MemberID]
		if !s.CanManageAccount() && role == nil && ws.ID != acct.DefaultWorkspaceID {
			continue
		}
		v := wsView{Workspace: ws, HasRates: ws.RateLimits.Any()}
		posted := data.Section == "ws-"+ws.ID && data.Form.Has("rate_limits."+rateFields[0].Name)
		for i, val := range rateValues(ws.RateLimits) {
			rr := wsRate{rateField: rateFields[i], Value: val}
			if posted {
				name := "rate_limits." + rr.Name
				rr.Value, rr.Err = data.Form.Get(name), data.Errors[name]
			}
			v.Rates = append(v.Rates, rr)
		}
		for _, b := range ws.SortedBudgets() {
			v.Budgets = append(v.Budgets, budgetView{Interval: b.Interval, Limit: b.Limit, Spent: ws.BudgetUsage(b.Interval, now())})
		}
		v.CanAddMember = data.IsOrg && ws.ID != acct.DefaultWorkspaceID &&
			(s.CanManageAccount() || (role != nil && role.Role == storage.RoleAdmin))
		for id := range ws.Members {
			if m, ok := members[id]; ok {
				v.Members = append(v.Members, m)
			}
		}
		if v.CanAddMember {
			for _, m := range all {
				if ws.Members[m.ID] == nil {
					v.Candidates = append(v.Candidates, m)
				}
			}
		}
		data.Workspaces = append(data.Workspaces, v)
	}
	if s.CanManageAccount() {
		list := func(sub string) ([]gjson.Result, string) {
			a := d.callAccount(r, s, http.MethodGet, sub, "limit=100", nil)
			if !a.ok() {
				return nil, a.Err.Message
			}
			return a.get("data").Array(), ""
		}
		data.Guardrails, data.GuardOff = list("/guardrails")
		data.BYOK, data.BYOKOff = list("/byok")
		data.Destinations, data.DestOff = list("/observability/destinations")
	}
	d.page(w, r, status, "Settings", "settings", "settings", data)
}

// requireManage refuses an owner's or admin's action to others.
func (d *Dashboard) requireManage(w http.ResponseWriter, r *http.Request, s Session, what string) bool {
	if s.CanManageAccount() {
		return true
	}
	d.forbidden(w, r, s, what)
	return false
}

// settingsAction calls the API route and shows the outcome: back to the
// settings with "saved", or the form's errors next to its fields.
func (d *Dashboard) settingsAction(w http.ResponseWriter, r *http.Request, s Session, section, action, method, sub string, body any, fields ...string) {
	a := d.callAccount(r, s, method, sub, "", body)
	d.logAction(r, s, action, a)
	if !a.ok() {
		d.renderSettings(w, r, s, a.Status, section, r.PostForm, fieldError(a.Err, fields...))
		return
	}
	http.Redirect(w, r, d.Prefix+"/settings?saved="+url.QueryEscape(section)+"#"+section, http.StatusSeeOther)
}

func (d *Dashboard) updateOrg(w http.ResponseWriter, r *http.Request, s Session) {
	if !d.requireManage(w, r, s, "change the organization's settings") {
		return
	}
	d.settingsAction(w, r, s, "organization", "update organization settings", http.MethodPatch, "/organization/settings",
		map[string]any{"is_filtered_model_catalog_enabled": r.PostFormValue("is_filtered_model_catalog_enabled") == "on"},
		"is_filtered_model_catalog_enabled")
}

func (d *Dashboard) createWorkspace(w http.ResponseWriter, r *http.Request, s Session) {
	if !d.requireManage(w, r, s, "create workspaces") {
		return
	}
	body := map[string]any{"name": r.PostFormValue("name")}
	if v := r.PostFormValue("slug"); v != "" {
		body["slug"] = v
	}
	if v := r.PostFormValue("description"); v != "" {
		body["description"] = v
	}
	d.settingsAction(w, r, s, "workspaces", "create workspace", http.MethodPost, "/workspaces", body, "name", "slug", "description")
}

func (d *Dashboard) setBudget(w http.ResponseWriter, r *http.Request, s Session) {
	if !d.requireManage(w, r, s, "set workspace budgets") {
		return
	}
	ref := url.PathEscape(r.PathValue("ref"))
	iv := url.PathEscape(r.PostFormValue("interval"))
	section := "ws-" + r.PathValue("ref")
	if strings.TrimSpace(r.PostFormValue("limit_usd")) == "" {
		d.settingsAction(w, r, s, section, "delete workspace budget", http.MethodDelete, "/workspaces/"+ref+"/budgets/"+iv, nil, "interval")
		return
	}
	d.settingsAction(w, r, s, section, "set workspace budget", http.MethodPut, "/workspaces/"+ref+"/budgets/"+iv,
		map[string]any{"limit_usd": jsonNumber(r.PostFormValue("limit_usd")), "include_byok_in_budgets": r.PostFormValue("include_byok_in_budgets") == "on"},
		"limit_usd", "include_byok_in_budgets", "interval")
}

// setWorkspaceRateLimits sets a workspace's rate limits (an empty field:
// none), as only an owner or admin may.
func (d *Dashboard) setWorkspaceRateLimits(w http.ResponseWriter, r *http.Request, s Session) {
	if !d.requireManage(w, r, s, "set workspace rate limits") {
		return
	}
	_ = r.ParseForm() // a bad body leaves the form empty: every limit removed is not what was meant
	rl := rateLimitsBody(r.PostForm)
	if rl == nil {
		d.renderSettings(w, r, s, http.StatusBadRequest, "ws-"+r.PathValue("ref"), r.PostForm, formErrors{"": "No rate limit was posted. Nothing was changed."})
		return
	}
	d.settingsAction(w, r, s, "ws-"+r.PathValue("ref"), "set workspace rate limits", http.MethodPatch, "/workspaces/"+url.PathEscape(r.PathValue("ref")),
		map[string]any{"rate_limits": rl}, rateFieldNames()...)
}

// addWorkspaceMembers adds organization members to a workspace: an owner
// or admin, or a member who is that workspace's admin.
func (d *Dashboard) addWorkspaceMembers(w http.ResponseWriter, r *http.Request, s Session) {
	st, acct, ok := d.account(w, r, s)
	if !ok {
		return
	}
	ws, ok := st.Workspace(acct.ID, r.PathValue("ref"))
	if !ok {
		d.errorPage(w, r, http.StatusNotFound, "Workspace not found", "Nothing was changed.")
		return
	}
	if !s.CanManageAccount() {
		if m := ws.Members[s.MemberID]; m == nil || m.Role != storage.RoleAdmin {
			d.forbidden(w, r, s, "add members to this workspace (only its admins can)")
			return
		}
	}
	ids := r.PostForm["user_ids"]
	if ids == nil {
		ids = []string{}
	}
	d.settingsAction(w, r, s, "ws-"+ws.ID, "add workspace members", http.MethodPost, "/workspaces/"+url.PathEscape(ws.ID)+"/members/add",
		map[string]any{"user_ids": ids}, "user_ids")
}

func (d *Dashboard) createGuardrail(w http.ResponseWriter, r *http.Request, s Session) {
	if !d.requireManage(w, r, s, "create guardrails") {
		return
	}
	body := map[string]any{"name": r.PostFormValue("name")}
	if v := strings.TrimSpace(r.PostFormValue("limit_usd")); v != "" {
		body["limit_usd"] = jsonNumber(v)
	}
	if v := r.PostFormValue("reset_interval"); v != "" {
		body["reset_interval"] = v
	}
	if v := splitList(r.PostFormValue("allowed_models")); len(v) > 0 {
		body["allowed_models"] = v
	}
	if v := splitList(r.PostFormValue("allowed_providers")); len(v) > 0 {
		body["allowed_providers"] = v
	}
	d.settingsAction(w, r, s, "guardrails", "create guardrail", http.MethodPost, "/guardrails", body,
		"name", "limit_usd", "reset_interval", "allowed_models", "allowed_providers")
}

func (d *Dashboard) createBYOK(w http.ResponseWriter, r *http.Request, s Session) {
	if !d.requireManage(w, r, s, "add BYOK keys") {
		return
	}
	body := map[string]any{"provider": r.PostFormValue("provider"), "key": r.PostFormValue("key")}
	if v := r.PostFormValue("name"); v != "" {
		body["name"] = v
	}
	// The provider key is never shown again, nor put back in the form.
	r.PostForm.Del("key")
	d.settingsAction(w, r, s, "byok", "add BYOK key", http.MethodPost, "/byok", body, "provider", "key", "name")
}

func (d *Dashboard) createDestination(w http.ResponseWriter, r *http.Request, s Session) {
	if !d.requireManage(w, r, s, "add observability destinations") {
		return
	}
	body := map[string]any{"type": "webhook", "name": r.PostFormValue("name"),
		"config": map[string]any{"url": r.PostFormValue("url")}}
	d.settingsAction(w, r, s, "observability", "add observability destination", http.MethodPost, "/observability/destinations", body,
		"name", "type", "config.url", "config")
}

// deleteResource deletes {id} of a collection through its DELETE route.
func (d *Dashboard) deleteResource(sub, action string) func(http.ResponseWriter, *http.Request, Session) {
	return func(w http.ResponseWriter, r *http.Request, s Session) {
		if !d.requireManage(w, r, s, action) {
			return
		}
		section := strings.Trim(strings.TrimPrefix(sub, "/observability"), "/")
		if section == "destinations" {
			section = "observability"
		}
		d.settingsAction(w, r, s, section, action, http.MethodDelete, sub+url.PathEscape(r.PathValue("id")), nil)
	}
}

// splitList reads a comma- or line-separated list.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' }) {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
