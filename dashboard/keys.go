package dashboard

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// keysPage is how many keys the list shows at once.
const keysPage = 100

type pageFunc func(pattern string, h func(w http.ResponseWriter, r *http.Request, s Session))

// accountRoutes registers the account's pages.
func (d *Dashboard) accountRoutes(page pageFunc) {
	page("GET /keys", d.keysList)
	page("POST /keys", d.createKey)
	page("GET /keys/{hash}", d.keyPage)
	page("POST /keys/{hash}", d.updateKey)
	page("POST /keys/{hash}/disable", d.setKeyDisabled(true))
	page("POST /keys/{hash}/enable", d.setKeyDisabled(false))
	page("GET /keys/{hash}/delete", d.confirmDeleteKey)
	page("POST /keys/{hash}/delete", d.deleteKey)
	page("POST /management-keys", d.createMgmtKey)
	d.activityRoutes(page)
	d.settingsRoutes(page)
	d.presetsRoutes(page)
}

// jsonNumber is a form's number for a JSON body: the number itself when
// it is one, else the text (which the API refuses, naming the field).
func jsonNumber(s string) any {
	s = strings.TrimSpace(s)
	if json.Valid([]byte(s)) {
		var n json.Number
		if json.Unmarshal([]byte(s), &n) == nil {
			return n
		}
	}
	return s
}

type keysData struct {
	Prefix      string
	Keys        []keyUse
	Total       int
	Offset      int
	Next, Prev  int
	Workspaces  []storage.Workspace
	Workspace   string
	Form        url.Values
	Errors      formErrors
	MgmtKeys    []storage.ManagementKey
	MgmtErrors  formErrors
	MgmtForm    url.Values
	CanManage   bool
	IsOrg       bool
	Role        Role
	Created     string // a key string shown once
	CreatedName string
	CreatedKind string
	// CreatedGone: the page of a new key was opened again; the key is
	// not shown twice.
	CreatedGone bool
}

// keysList shows the keys the session may see, one page at a time.
func (d *Dashboard) keysList(w http.ResponseWriter, r *http.Request, s Session) {
	data := keysData{Form: url.Values{}, MgmtForm: url.Values{}}
	if id := r.URL.Query().Get("created"); id != "" {
		// The new key of the POST that redirected here, shown once.
		st := d.store()
		if st == nil {
			d.errorPage(w, r, http.StatusServiceUnavailable, "The gateway's database is unavailable", "Retry in a moment.")
			return
		}
		f, err := st.takeFlash(sessionCookie(r), id)
		switch {
		case err == nil:
			data.Created, data.CreatedName, data.CreatedKind = f.Key, f.Name, f.Kind
		case errors.Is(err, errFlashGone):
			data.CreatedGone = true
		default:
			d.logger.Error("dashboard: the new key's page could not be read", append(sessionFields(s, r), zap.Error(err))...)
			d.errorPage(w, r, http.StatusServiceUnavailable, "The gateway's database is unavailable",
				"The new key is kept for a few minutes: reload this page in a moment to see it.")
			return
		}
	}
	d.renderKeys(w, r, s, http.StatusOK, data)
}

func (d *Dashboard) renderKeys(w http.ResponseWriter, r *http.Request, s Session, status int, data keysData) {
	st, acct, ok := d.account(w, r, s)
	if !ok {
		return
	}
	t := now()
	data.Prefix, data.CanManage, data.Role = d.Prefix, s.CanManageAccount(), s.Role
	data.IsOrg = acct.Kind == storage.AccountOrganization
	data.Workspaces = d.workspacesOf(st, s, acct)
	data.Workspace = r.URL.Query().Get("workspace")
	wsID := ""
	if data.Workspace != "" {
		if ws, ok := st.Workspace(acct.ID, data.Workspace); ok {
			wsID = ws.ID
		}
	}
	keys := d.visibleKeys(st, s, acct, wsID)
	data.Total = len(keys)
	data.Offset, _ = strconv.Atoi(r.URL.Query().Get("offset"))
	data.Offset = max(0, min(data.Offset, max(0, len(keys)-1)))
	end := min(len(keys), data.Offset+keysPage)
	for _, k := range keys[data.Offset:end] {
		data.Keys = append(data.Keys, useOf(k, t))
	}
	data.Next, data.Prev = -1, -1
	if end < len(keys) {
		data.Next = end
	}
	if data.Offset > 0 {
		data.Prev = max(0, data.Offset-keysPage)
	}
	if data.CanManage {
		data.MgmtKeys = st.ManagementKeys(acct.ID)
	}
	d.page(w, r, status, "API keys", "keys", "keys", data)
}

// workspacesOf are the workspaces a session may create keys in: every one
// for an owner or admin, those the member belongs to for a member.
func (d *Dashboard) workspacesOf(st *storage.Store, s Session, acct storage.Account) []storage.Workspace {
	all := st.Workspaces(acct.ID)
	if s.CanManageAccount() {
		return all
	}
	var out []storage.Workspace
	for _, w := range all {
		if w.ID == acct.DefaultWorkspaceID || w.Members[s.MemberID] != nil {
			out = append(out, w)
		}
	}
	return out
}

// keyFields are the key form's fields, as the API names them.
var keyFields = append([]string{"name", "limit", "limit_reset", "include_byok_in_limit", "workspace_id", "expires_at", "disabled"}, rateFieldNames()...)

// rateField is one of a key's rate limits in its form: the API's name and
// what the form calls it.
type rateField struct{ Name, Label string }

var rateFields = []rateField{
	{"requests_per_minute", "Requests a minute"},
	{"requests_per_day", "Requests a day"},
	{"prompt_tokens_per_minute", "Prompt tokens a minute"},
	{"completion_tokens_per_minute", "Completion tokens a minute"},
	{"concurrent_requests", "Requests at once"},
}

// rateFieldNames are the rate limits' form fields, as the API's errors
// name them (rate_limits.<name>).
func rateFieldNames() []string {
	out := make([]string, len(rateFields))
	for i, f := range rateFields {
		out[i] = "rate_limits." + f.Name
	}
	return out
}

// rateValues are the limits of rl in rateFields' order, as a form shows
// them ("": none).
func rateValues(rl *storage.RateLimits) [5]string {
	var out [5]string
	if rl == nil {
		return out
	}
	for i, v := range [...]int64{rl.RequestsPerMinute, rl.RequestsPerDay, rl.PromptTokensPerMinute, rl.CompletionTokensPerMinute, rl.ConcurrentRequests} {
		if v > 0 {
			out[i] = strconv.FormatInt(v, 10)
		}
	}
	return out
}

// rateLimitsBody is the rate_limits member of a form that has the rate
// limits' fields (an empty one: none); nil when it has none of them.
func rateLimitsBody(f url.Values) map[string]any {
	var out map[string]any
	for _, rf := range rateFields {
		name := "rate_limits." + rf.Name
		if !f.Has(name) {
			continue
		}
		if out == nil {
			out = map[string]any{}
		}
		if v := strings.TrimSpace(f.Get(name)); v != "" {
			out[rf.Name] = jsonNumber(v)
		} else {
			out[rf.Name] = nil
		}
	}
	return out
}

// keyBody is the API body of the key form; with all, every field (an
// update), else only those filled in (a creation).
func keyBody(f url.Values, all bool) map[string]any {
	body := map[string]any{}
	if v := f.Get("name"); v != "" || all {
		body["name"] = v
	}
	switch v := strings.TrimSpace(f.Get("limit")); {
	case v != "":
		body["limit"] = jsonNumber(v)
	case all:
		body["limit"] = nil
	}
	switch v := f.Get("limit_reset"); {
	case v != "":
		body["limit_reset"] = v
	case all:
		body["limit_reset"] = nil
	}
	body["include_byok_in_limit"] = f.Get("include_byok_in_limit") == "on"
	if rl := rateLimitsBody(f); rl != nil {
		body["rate_limits"] = rl
	}
	if v := f.Get("workspace_id"); v != "" && !all {
		body["workspace_id"] = v
	}
	if v := f.Get("expires_at"); v != "" && !all {
		// A date input's day, to its end in UTC.
		if t, err := time.Parse("2006-01-02", v); err == nil {
			v = t.Add(24*time.Hour - time.Second).Format(time.RFC3339)
		}
		body["expires_at"] = v
	}
	return body
}

// createKey creates an API key through POST /keys; a member's key is
// theirs (creator_user_id), in a workspace they belong to.
func (d *Dashboard) createKey(w http.ResponseWriter, r *http.Request, s Session) {
	st, acct, ok := d.account(w, r, s)
	if !ok {
		return
	}
	body := keyBody(r.PostForm, false)
	if s.MemberID != "" {
		body["creator_user_id"] = s.MemberID
	}
	if !s.CanManageAccount() {
		ws := r.PostFormValue("workspace_id")
		if ws != "" && !slices.ContainsFunc(d.workspacesOf(st, s, acct), func(w storage.Workspace) bool { return w.ID == ws || w.Slug == ws }) {
			d.forbidden(w, r, s, "create keys in a workspace you are not a member of")
			return
		}
	}
	a := d.callAccount(r, s, http.MethodPost, "/keys", "", body)
	d.logAction(r, s, "create API key", a)
	if !a.ok() {
		d.renderKeys(w, r, s, a.Status, keysData{Form: r.PostForm, Errors: fieldError(a.Err, keyFields...), MgmtForm: url.Values{}})
		return
	}
	d.showOnce(w, r, s, flash{Key: a.get("key").Str, Name: a.get("data.name").Str, Kind: "API key"})
}

// showOnce answers the POST that created a key with a redirect to the
// keys page, which shows the key once (a flash): a refresh of that page
// repeats the GET, never the POST, and shows the key no more. If the
// flash cannot be stored, the key is shown in the POST's answer rather
// than lost.
func (d *Dashboard) showOnce(w http.ResponseWriter, r *http.Request, s Session, f flash) {
	if st, c := d.store(), sessionCookie(r); st != nil && c != "" {
		id, err := st.putFlash(c, f)
		if err == nil {
			http.Redirect(w, r, d.Prefix+"/keys?created="+url.QueryEscape(id), http.StatusSeeOther)
			return
		}
		d.logger.Error("dashboard: the new key's page could not be stored; shown in the answer", append(sessionFields(s, r), zap.Error(err))...)
	}
	d.renderKeys(w, r, s, http.StatusCreated, keysData{Form: url.Values{}, MgmtForm: url.Values{},
		Created: f.Key, CreatedName: f.Name, CreatedKind: f.Kind})
}

// sessionCookie is the request's session cookie value; "" without one.
func sessionCookie(r *http.Request) string {
	c, err := r.Cookie(CookieName)
	if err != nil {
		return ""
	}
	return c.Value
}

type keyPageData struct {
	Prefix    string
	CanManage bool
	Key       keyUse
	Form      url.Values
	Errors    formErrors
	Saved     bool
	Workspace string
	Resets    []string
	Rates     []rateField
}

// keyPage shows one key with its edit form.
func (d *Dashboard) keyPage(w http.ResponseWriter, r *http.Request, s Session) {
	d.renderKey(w, r, s, http.StatusOK, nil, nil)
}

func (d *Dashboard) renderKey(w http.ResponseWriter, r *http.Request, s Session, status int, form url.Values, errs formErrors) {
	st, acct, ok := d.account(w, r, s)
	if !ok {
		return
	}
	k, ok := d.ownKey(st, s, r.PathValue("hash"))
	if !ok {
		d.errorPage(w, r, http.StatusNotFound, "API key not found", "No key of yours has this hash.")
		return
	}
	if form == nil {
		form = url.Values{"name": {k.Name}, "limit_reset": {string(k.LimitReset)}}
		if k.Limit != nil {
			form.Set("limit", strings.TrimRight(strings.TrimRight(k.Limit.String(), "0"), "."))
		}
		if k.IncludeBYOKInLimit {
			form.Set("include_byok_in_limit", "on")
		}
		for i, v := range rateValues(k.RateLimits) {
			form.Set("rate_limits."+rateFields[i].Name, v)
		}
	}
	data := keyPageData{Prefix: d.Prefix, CanManage: s.CanManageAccount(), Key: useOf(k, now()), Form: form, Errors: errs, Saved: r.URL.Query().Get("saved") != "",
		Resets: []string{"daily", "weekly", "monthly"}, Rates: rateFields}
	if ws, ok := st.Workspace(acct.ID, k.WorkspaceID); ok {
		data.Workspace = ws.Name
	}
	d.page(w, r, status, "API key "+k.Name, "keys", "key", data)
}

// updateKey changes a key through PATCH /keys/{hash}.
func (d *Dashboard) updateKey(w http.ResponseWriter, r *http.Request, s Session) {
	st, err := d.gatewayStore()
	if err != nil {
		d.errorPage(w, r, http.StatusServiceUnavailable, "The gateway's database is unavailable", "Nothing was changed.")
		return
	}
	hash := r.PathValue("hash")
	k, ok := d.ownKey(st, s, hash)
	if !ok {
		d.errorPage(w, r, http.StatusNotFound, "API key not found", "No key of yours has this hash. Nothing was changed.")
		return
	}
	body := keyBody(r.PostForm, true)
	if k.LimitByAdmin && !s.CanManageAccount() && !r.PostForm.Has("limit") {
		// The member's form shows an admin's limit without its fields:
		// the rest of the key is theirs to change. (Fields sent anyway
		// go to the API, whose rule refuses a change of them.)
		delete(body, "limit")
		delete(body, "limit_reset")
		delete(body, "include_byok_in_limit")
	}
	a := d.callAccount(r, s, http.MethodPatch, "/keys/"+url.PathEscape(hash), "", body)
	d.logAction(r, s, "update API key", a)
	if !a.ok() {
		d.renderKey(w, r, s, a.Status, r.PostForm, fieldError(a.Err, keyFields...))
		return
	}
	http.Redirect(w, r, d.Prefix+"/keys/"+url.PathEscape(hash)+"?saved=1", http.StatusSeeOther)
}

// setKeyDisabled disables or enables a key through PATCH /keys/{hash}.
func (d *Dashboard) setKeyDisabled(disabled bool) func(http.ResponseWriter, *http.Request, Session) {
	return func(w http.ResponseWriter, r *http.Request, s Session) {
		st, err := d.gatewayStore()
		if err != nil {
			d.errorPage(w, r, http.StatusServiceUnavailable, "The gateway's database is unavailable", "Nothing was changed.")
			return
		}
		hash := r.PathValue("hash")
		if _, ok := d.ownKey(st, s, hash); !ok {
			d.errorPage(w, r, http.StatusNotFound, "API key not found", "No key of yours has this hash. Nothing was changed.")
			return
		}
		a := d.callAccount(r, s, http.MethodPatch, "/keys/"+url.PathEscape(hash), "", map[string]any{"disabled": disabled})
		d.logAction(r, s, map[bool]string{true: "disable API key", false: "enable API key"}[disabled], a)
		if !a.ok() {
			d.errorPage(w, r, a.Status, "The key was not changed", a.Err.Message)
			return
		}
		http.Redirect(w, r, d.Prefix+"/keys/"+url.PathEscape(hash)+"?saved=1", http.StatusSeeOther)
	}
}

// confirmDeleteKey asks before deleting (without script too).
func (d *Dashboard) confirmDeleteKey(w http.ResponseWriter, r *http.Request, s Session) {
	st, err := d.gatewayStore()
	if err != nil {
		d.errorPage(w, r, http.StatusServiceUnavailable, "The gateway's database is unavailable", "Retry in a moment.")
		return
	}
	k, ok := d.ownKey(st, s, r.PathValue("hash"))
	if !ok {
		d.errorPage(w, r, http.StatusNotFound, "API key not found", "No key of yours has this hash.")
		return
	}
	d.page(w, r, http.StatusOK, "Delete API key "+k.Name+"?", "keys", "confirmdelete", map[string]any{"Prefix": d.Prefix, "Key": k})
}

// deleteKey deletes a key through DELETE /keys/{hash}.
func (d *Dashboard) deleteKey(w http.ResponseWriter, r *http.Request, s Session) {
	st, err := d.gatewayStore()
	if err != nil {
		d.errorPage(w, r, http.StatusServiceUnavailable, "The gateway's database is unavailable", "Nothing was changed.")
		return
	}
	hash := r.PathValue("hash")
	if _, ok := d.ownKey(st, s, hash); !ok {
		d.errorPage(w, r, http.StatusNotFound, "API key not found", "No key of yours has this hash. Nothing was changed.")
		return
	}
	a := d.callAccount(r, s, http.MethodDelete, "/keys/"+url.PathEscape(hash), "", nil)
	d.logAction(r, s, "delete API key", a)
	if !a.ok() {
		d.errorPage(w, r, a.Status, "The key was not deleted", a.Err.Message)
		return
	}
	http.Redirect(w, r, d.Prefix+"/keys", http.StatusSeeOther)
}

// mgmtFields are the management key form's fields.
var mgmtFields = []string{"name", "expires_in", "expires_at", "creator_user_id"}

// createMgmtKey creates a management key through the operator API's
// route, as the signed-in member (creator_user_id): the store lets only
// an organization's active admins create one.
func (d *Dashboard) createMgmtKey(w http.ResponseWriter, r *http.Request, s Session) {
	body := map[string]any{"name": r.PostFormValue("name")}
	if v := r.PostFormValue("expires_in"); v != "" {
		body["expires_in"] = v
	}
	if s.MemberID != "" {
		body["creator_user_id"] = s.MemberID
	}
	a := d.callOperator(r, http.MethodPost, "/tollgate/accounts/"+url.PathEscape(s.AccountID)+"/management-keys", body)
	d.logAction(r, s, "create management key", a)
	if !a.ok() {
		d.renderKeys(w, r, s, a.Status, keysData{Form: url.Values{}, MgmtForm: r.PostForm, MgmtErrors: fieldError(a.Err, mgmtFields...)})
		return
	}
	d.showOnce(w, r, s, flash{Key: a.get("key").Str, Name: a.get("data.name").Str, Kind: "management key"})
}
