package caddymodule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

func init() {
	caddy.RegisterModule(new(OperatorAPI))
}

// OperatorAPI is the operator's interface to the gateway, served under
// /tollgate/ on Caddy's admin endpoint: accounts, credit purchases and
// management keys. It relies on the admin endpoint's own access controls
// (local socket or remote-admin mTLS) instead of keys of its own.
//
// Caddy provisions admin routers before the apps of the config they come
// with, and keeps them when a later config fails to load, so the app is
// looked up in the running config on each request.
type OperatorAPI struct {
	running func() *App // the running tollgate app; nil when none runs
	log     *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (*OperatorAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.tollgate",
		New: func() caddy.Module { return new(OperatorAPI) },
	}
}

// Provision sets up the lookup of the running app.
func (o *OperatorAPI) Provision(caddy.Context) error {
	o.running = runningApp
	o.log = caddy.Log().Named("tollgate.operator")
	return nil
}

// runningApp is the tollgate app of the config Caddy runs, if any.
func runningApp() *App {
	app, err := caddy.ActiveContext().AppIfConfigured(gateway.AppName)
	if err != nil {
		return nil
	}
	a, _ := app.(*App)
	return a
}

// Routes returns the /tollgate/ routes. Caddy's admin mux hands every path
// below them to serveHTTP, which routes them on operatorTable.
func (o *OperatorAPI) Routes() []caddy.AdminRoute {
	h := caddy.AdminHandlerFunc(o.serveHTTP)
	return []caddy.AdminRoute{
		{Pattern: "/tollgate/accounts", Handler: h},
		{Pattern: "/tollgate/accounts/", Handler: h},
		{Pattern: "/tollgate/management-keys", Handler: h},
		{Pattern: "/tollgate/management-keys/", Handler: h},
		{Pattern: "/tollgate/generations/", Handler: h},
		{Pattern: "/tollgate/signin-links", Handler: h},
	}
}

// maxOperatorBody bounds request bodies; the largest legitimate one is a
// few hundred bytes.
const maxOperatorBody = 1 << 20

// serveHTTP writes every answer itself, errors included, so that they have
// the gateway's error shape rather than caddy.APIError's; it always returns
// nil.
func (o *OperatorAPI) serveHTTP(w http.ResponseWriter, r *http.Request) error {
	var app *App
	if o.running != nil {
		app = o.running()
	}
	if app == nil {
		apierror.Write(w, &apierror.Error{Status: http.StatusServiceUnavailable, Message: "tollgate app is not running"})
		return nil
	}
	store, err := app.Store()
	if err != nil {
		apierror.Write(w, &apierror.Error{Status: http.StatusServiceUnavailable, Message: "tollgate database unavailable: " + err.Error()})
		return nil
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !store.Available() {
		// storage redis is down: refuse before anything changes.
		apierror.Write(w, &apierror.Error{Status: http.StatusServiceUnavailable, Message: "The gateway's database is unavailable; retry shortly"})
		return nil
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !store.Synced() {
		// storage redis lost track of other replicas' changes: no write
		// on a copy that may be stale until every record is reloaded.
		apierror.Write(w, &apierror.Error{Status: http.StatusServiceUnavailable, Message: "The gateway is reloading its records from the shared database; retry shortly"})
		return nil
	}
	log := o.log
	if log == nil {
		log = zap.NewNop()
	}
	c := &operatorCall{w: w, r: r, app: app, store: store, log: log}
	status, body, apiErr := c.route()
	if apiErr != nil {
		apierror.Write(w, apiErr)
		return nil
	}
	if status == answered {
		return nil
	}
	writeOperatorJSON(w, status, body)
	return nil
}

// operatorCall is one request to the operator API.
type operatorCall struct {
	w      http.ResponseWriter
	r      *http.Request
	app    *App
	store  *storage.Store
	log    *zap.Logger
	acct   storage.Account // the account of {id}, loaded before the handler runs
	member storage.Member  // the member of {member}, likewise
}

// route answers the request from operatorTable: the account and member its
// path names first (404 when missing), then the handler of its method or
// 405.
func (c *operatorCall) route() (int, any, *apierror.Error) {
	m := operatorTable.Lookup(c.r)
	if m == nil {
		return 0, nil, apierror.NotFound("no such route: " + c.r.URL.Path)
	}
	if apiErr := c.load(); apiErr != nil {
		return 0, nil, apiErr
	}
	if m.Endpoint == nil || m.Method != c.r.Method {
		return 0, nil, &apierror.Error{
			Status:  http.StatusMethodNotAllowed,
			Message: fmt.Sprintf("method %s not allowed; use %s", c.r.Method, m.Allow),
			Header:  http.Header{"Allow": {m.Allow}},
		}
	}
	return m.Endpoint.serve(c)
}

// load reads the account ({id}) and member ({member}) the path names.
func (c *operatorCall) load() *apierror.Error {
	if id := c.r.PathValue("id"); id != "" {
		acct, ok := c.store.Account(id)
		if !ok {
			return accountNotFound(id)
		}
		c.acct = acct
	}
	if id := c.r.PathValue("member"); id != "" {
		m, ok := c.store.Member(c.acct.ID, id)
		if !ok {
			return apierror.NotFound("member " + id + " not found")
		}
		c.member = m
	}
	return nil
}

func (c *operatorCall) listAccounts() (int, any, *apierror.Error) {
	accts := c.store.Accounts()
	out := make([]operatorAccount, len(accts))
	for i, a := range accts {
		out[i] = newOperatorAccount(a)
	}
	return http.StatusOK, dataOf(out), nil
}

func (c *operatorCall) createAccount() (int, any, *apierror.Error) {
	body, e := c.readBody("name", "type", "billing", "rate_limit_exempt", "rate_limits")
	if e != nil {
		return 0, nil, e
	}
	name, e := requiredString(body, "name")
	if e != nil {
		return 0, nil, e
	}
	kind, _, e := stringField(body, "type")
	if e != nil {
		return 0, nil, e
	}
	if k := storage.AccountKind(kind); k != storage.AccountPersonal && k != storage.AccountOrganization {
		return 0, nil, apierror.BadRequest(fmt.Sprintf("type: must be %q or %q", storage.AccountPersonal, storage.AccountOrganization))
	}
	na := storage.NewAccount{Name: name, Kind: storage.AccountKind(kind)}
	if na.Billing, _, e = billingField(body); e != nil {
		return 0, nil, e
	}
	if na.RateLimitExempt, _, e = boolField(body, "rate_limit_exempt"); e != nil {
		return 0, nil, e
	}
	if na.RateLimits, e = reqbody.RateLimits(body.Get("rate_limits"), nil); e != nil {
		return 0, nil, e
	}
	a, err := c.store.CreateAccount(na)
	if err != nil {
		return 0, nil, c.storeError(err)
	}
	c.log.Info("account created",
		zap.String("account_id", a.ID),
		zap.String("type", string(a.Kind)),
		zap.String("billing", string(a.Billing)))
	return http.StatusCreated, dataOf(newOperatorAccount(a)), nil
}

func (c *operatorCall) updateAccount(id string) (int, any, *apierror.Error) {
	body, e := c.readBody("name", "billing", "rate_limit_exempt", "rate_limits")
	if e != nil {
		return 0, nil, e
	}
	name, hasName, e := stringField(body, "name")
	if e != nil {
		return 0, nil, e
	}
	if hasName && strings.TrimSpace(name) == "" {
		return 0, nil, apierror.BadRequest("name: must be a non-empty string")
	}
	billing, hasBilling, e := billingField(body)
	if e != nil {
		return 0, nil, e
	}
	exempt, hasExempt, e := boolField(body, "rate_limit_exempt")
	if e != nil {
		return 0, nil, e
	}
	rates := body.Get("rate_limits")
	if rates.Exists() {
		if _, e := reqbody.RateLimits(rates, nil); e != nil {
			return 0, nil, e
		}
	}
	a, err := c.store.UpdateAccount(id, func(a *storage.Account) error {
		if hasName {
			a.Name = name
		}
		if hasBilling {
			a.Billing = billing
		}
		if hasExempt {
			a.RateLimitExempt = exempt
		}
		if rates.Exists() {
			// Checked above: merging a valid object cannot fail.
			a.RateLimits, _ = reqbody.RateLimits(rates, a.RateLimits)
		}
		return nil
	})
	if err != nil {
		return 0, nil, c.storeError(err)
	}
	c.log.Info("account updated", zap.String("account_id", a.ID))
	return http.StatusOK, dataOf(newOperatorAccount(a)), nil
}

func (c *operatorCall) addCredits(id string) (int, any, *apierror.Error) {
	body, e := c.readBody("amount", "note")
	if e != nil {
		return 0, nil, e
	}
	// The amount is parsed from its JSON text, never through float64, so
	// that "0.1" is exactly 100000000 nano-credits.
	var text string
	switch v := body.Get("amount"); v.Type {
	case gjson.Number:
		text = v.Raw
	case gjson.String:
		text = v.Str
	}
	amount, err := money.ParseAmount(text)
	if errors.Is(err, money.ErrAmountRange) {
		return 0, nil, apierror.BadRequest("amount: out of range")
	}
	if err != nil || amount <= 0 {
		return 0, nil, apierror.BadRequest("amount: must be a positive number")
	}
	note, _, e := stringField(body, "note")
	if e != nil {
		return 0, nil, e
	}
	p, a, err := c.store.RecordPurchase(id, amount, note)
	if err != nil {
		return 0, nil, c.storeError(err)
	}
	c.log.Info("credits added",
		zap.String("account_id", a.ID),
		zap.String("purchase_id", p.ID),
		zap.Stringer("amount", p.Amount))
	return http.StatusCreated, struct {
		Data    operatorPurchase `json:"data"`
		Account operatorAccount  `json:"account"`
	}{newOperatorPurchase(p), newOperatorAccount(a)}, nil
}

func (c *operatorCall) listPurchases(a storage.Account) (int, any, *apierror.Error) {
	ps := c.store.Purchases(a.ID)
	out := make([]operatorPurchase, len(ps))
	for i, p := range ps {
		out[i] = newOperatorPurchase(p)
	}
	return http.StatusOK, struct {
		Data         []operatorPurchase `json:"data"`
		TotalCredits money.Amount       `json:"total_credits"`
		TotalUsage   money.Amount       `json:"total_usage"`
	}{out, a.CreditsPurchased, a.Usage}, nil
}

func (c *operatorCall) createMgmtKey(id string) (int, any, *apierror.Error) {
	body, e := c.readBody("name", "expires_at", "expires_in", "creator_user_id")
	if e != nil {
		return 0, nil, e
	}
	name, e := requiredString(body, "name")
	if e != nil {
		return 0, nil, e
	}
	nk := storage.NewManagementKey{AccountID: id, Name: name}

	at, hasAt, e := stringField(body, "expires_at")
	if e != nil {
		return 0, nil, e
	}
	in, hasIn, e := stringField(body, "expires_in")
	if e != nil {
		return 0, nil, e
	}
	now := time.Now()
	switch {
	case hasAt && hasIn:
		return 0, nil, apierror.BadRequest("expires_in: cannot be combined with expires_at")
	case hasAt:
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return 0, nil, apierror.BadRequest("expires_at: must be an RFC 3339 timestamp such as 2030-01-02T15:04:05Z")
		}
		if !t.After(now) {
			return 0, nil, apierror.BadRequest("expires_at: must be in the future")
		}
		nk.ExpiresAt = &t
	case hasIn:
		d, err := time.ParseDuration(in)
		if err != nil {
			return 0, nil, apierror.BadRequest(`expires_in: must be a duration such as "720h"`)
		}
		if d <= 0 {
			return 0, nil, apierror.BadRequest("expires_in: must be positive")
		}
		t := now.Add(d)
		nk.ExpiresAt = &t
	}

	creator, hasCreator, e := stringField(body, "creator_user_id")
	if e != nil {
		return 0, nil, e
	}
	if hasCreator {
		if creator == "" {
			return 0, nil, apierror.BadRequest("creator_user_id: must be a non-empty string")
		}
		nk.CreatorUserID = &creator
	}

	k, secret, err := c.store.CreateManagementKey(nk)
	if err != nil {
		return 0, nil, c.storeError(err)
	}
	// Only the hash is logged: the key string exists nowhere but in this
	// response.
	c.log.Info("management key created",
		zap.String("account_id", k.AccountID),
		zap.String("hash", k.Hash))
	return http.StatusCreated, struct {
		Data operatorMgmtKey `json:"data"`
		Key  string          `json:"key"`
	}{newOperatorMgmtKey(k, now), secret}, nil
}

func (c *operatorCall) listMgmtKeys(accountID string) (int, any, *apierror.Error) {
	keys := c.store.ManagementKeys(accountID)
	now := time.Now()
	out := make([]operatorMgmtKey, len(keys))
	for i, k := range keys {
		out[i] = newOperatorMgmtKey(k, now)
	}
	return http.StatusOK, dataOf(out), nil
}

func (c *operatorCall) revokeMgmtKey(hash string) (int, any, *apierror.Error) {
	if err := c.store.DeleteManagementKey(hash); err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return 0, nil, apierror.NotFound("management key " + hash + " not found")
		}
		return 0, nil, c.storeError(err)
	}
	c.log.Info("management key revoked", zap.String("hash", hash))
	return http.StatusOK, map[string]bool{"deleted": true}, nil
}

// readBody reads the request body as a JSON object whose keys are all among
// allowed: a misspelled optional field would otherwise be silently ignored.
// An empty body counts as {}, so that missing fields are named.
func (c *operatorCall) readBody(allowed ...string) (gjson.Result, *apierror.Error) {
	b, err := io.ReadAll(http.MaxBytesReader(c.w, c.r.Body, maxOperatorBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return gjson.Result{}, &apierror.Error{Status: http.StatusRequestEntityTooLarge, Message: "request body too large"}
		}
		return gjson.Result{}, apierror.BadRequest("reading request body: " + err.Error())
	}
	if len(bytes.TrimSpace(b)) == 0 {
		b = []byte("{}")
	}
	// Checked without recursion (depth, UTF-8, repeated keys, control
	// characters) before gjson reads it.
	if err := jsoncheck.CheckText(b, nil); err != nil {
		return gjson.Result{}, operatorBodyError(err)
	}
	body := gjson.ParseBytes(b)
	if !body.IsObject() {
		return gjson.Result{}, apierror.BadRequest("request body must be a JSON object")
	}
	var e *apierror.Error
	body.ForEach(func(k, _ gjson.Result) bool {
		if !slices.Contains(allowed, k.Str) {
			e = apierror.BadRequest(k.Str + ": unknown field")
		}
		return e == nil
	})
	return body, e
}

// operatorBodyError is the 400 for a body jsoncheck refused.
func operatorBodyError(err *jsoncheck.Error) *apierror.Error {
	switch {
	case err.Kind == jsoncheck.TooDeep:
		return apierror.BadRequest(fmt.Sprintf("request body nests deeper than %d levels", jsoncheck.MaxDepth))
	case err.Kind == jsoncheck.Syntax:
		return apierror.BadRequest("request body is not valid JSON")
	}
	return apierror.BadRequest(err.Error())
}

// storeError maps a store error to a response; unexpected ones are logged
// and answered with a generic 500.
func (c *operatorCall) storeError(err error) *apierror.Error {
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return apierror.NotFound(err.Error())
	case errors.Is(err, storage.ErrInvalid):
		return apierror.BadRequest(strings.TrimPrefix(err.Error(), storage.ErrInvalid.Error()+": "))
	case errors.Is(err, storage.ErrForbidden):
		return &apierror.Error{Status: http.StatusForbidden, Message: strings.TrimPrefix(err.Error(), storage.ErrForbidden.Error()+": ")}
	case errors.Is(err, storage.ErrConflict):
		return &apierror.Error{Status: http.StatusConflict, Message: strings.TrimPrefix(err.Error(), storage.ErrConflict.Error()+": ")}
	}
	c.log.Error("store operation failed", zap.String("path", c.r.URL.Path), zap.Error(err))
	return &apierror.Error{Status: http.StatusInternalServerError, Message: "Internal Server Error"}
}

// stringField returns an optional string field; null counts as absent.
func stringField(body gjson.Result, field string) (string, bool, *apierror.Error) {
	v := body.Get(field)
	switch v.Type {
	case gjson.Null:
		return "", false, nil
	case gjson.String:
		if e := reqbody.CheckTextField(field, v); e != nil {
			return "", false, e
		}
		return v.Str, true, nil
	}
	return "", false, apierror.BadRequest(field + ": must be a string")
}

// requiredString returns a field that must be a string with more than
// white space.
func requiredString(body gjson.Result, field string) (string, *apierror.Error) {
	v, ok, e := stringField(body, field)
	if e != nil {
		return "", e
	}
	if !ok || strings.TrimSpace(v) == "" {
		return "", apierror.BadRequest(field + ": must be a non-empty string")
	}
	return v, nil
}

// boolField returns an optional boolean field; null counts as absent.
func boolField(body gjson.Result, field string) (bool, bool, *apierror.Error) {
	v := body.Get(field)
	switch v.Type {
	case gjson.Null:
		return false, false, nil
	case gjson.True, gjson.False:
		return v.Bool(), true, nil
	}
	return false, false, apierror.BadRequest(field + ": must be a boolean")
}

// billingField returns the optional billing field.
func billingField(body gjson.Result) (storage.Billing, bool, *apierror.Error) {
	s, ok, e := stringField(body, "billing")
	if e != nil || !ok {
		return "", false, e
	}
	b, valid := storage.ParseBilling(s)
	if !valid {
		return "", false, apierror.BadRequest(fmt.Sprintf("billing: must be one of %q, %q, %q or %q",
			storage.BillingPrepaid, storage.BillingEnterprise, storage.BillingSubscription, storage.BillingInvoiced))
	}
	return b, true, nil
}

func accountNotFound(id string) *apierror.Error {
	return apierror.NotFound("account " + id + " not found")
}

// dataOf wraps a response in the {"data": ...} envelope.
func dataOf(v any) any {
	return struct {
		Data any `json:"data"`
	}{v}
}

func writeOperatorJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if err := enc.Encode(v); err != nil {
		apierror.Write(w, &apierror.Error{Status: http.StatusInternalServerError, Message: "Internal Server Error"})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store") // responses may carry a key string
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes()) // the status is sent: a failed write is a client gone
}

// operatorAccount is the operator's view of an account. Amounts are exact
// decimal JSON numbers.
type operatorAccount struct {
	ID                            string       `json:"id"`
	Name                          string       `json:"name"`
	Type                          string       `json:"type"`
	Billing                       string       `json:"billing"`
	DefaultWorkspaceID            string       `json:"default_workspace_id"`
	TotalCredits                  money.Amount `json:"total_credits"`
	TotalUsage                    money.Amount `json:"total_usage"`
	Balance                       money.Amount `json:"balance"`
	RateLimitExempt               bool         `json:"rate_limit_exempt"`
	IsFilteredModelCatalogEnabled bool         `json:"is_filtered_model_catalog_enabled"`
	// RateLimits are the account's own rate limits; absent: the gateway's
	// defaults.
	RateLimits *storage.RateLimits `json:"rate_limits,omitempty"`
	CreatedAt  time.Time           `json:"created_at"`
	UpdatedAt  time.Time           `json:"updated_at"`
}

func newOperatorAccount(a storage.Account) operatorAccount {
	return operatorAccount{
		ID:                            a.ID,
		Name:                          a.Name,
		Type:                          string(a.Kind),
		Billing:                       string(a.Billing),
		DefaultWorkspaceID:            a.DefaultWorkspaceID,
		TotalCredits:                  a.CreditsPurchased,
		TotalUsage:                    a.Usage,
		Balance:                       a.Balance(),
		RateLimitExempt:               a.RateLimitExempt,
		IsFilteredModelCatalogEnabled: a.FilteredModelCatalog,
		RateLimits:                    a.RateLimits,
		CreatedAt:                     a.CreatedAt.UTC(),
		UpdatedAt:                     a.UpdatedAt.UTC(),
	}
}

// operatorPurchase is the operator's view of a credit purchase.
type operatorPurchase struct {
	ID        string       `json:"id"`
	AccountID string       `json:"account_id"`
	Amount    money.Amount `json:"amount"`
	Note      string       `json:"note"`
	CreatedAt time.Time    `json:"created_at"`
}

func newOperatorPurchase(p storage.Purchase) operatorPurchase {
	return operatorPurchase{
		ID:        p.ID,
		AccountID: p.AccountID,
		Amount:    p.Amount,
		Note:      p.Note,
		CreatedAt: p.CreatedAt.UTC(),
	}
}

// operatorMgmtKey is the operator's view of a management key; it never
// holds the key string.
type operatorMgmtKey struct {
	Hash          string     `json:"hash"`
	AccountID     string     `json:"account_id"`
	Name          string     `json:"name"`
	Label         string     `json:"label"`
	CreatorUserID *string    `json:"creator_user_id"`
	CreatedAt     time.Time  `json:"created_at"`
	ExpiresAt     *time.Time `json:"expires_at"`
	Expired       bool       `json:"expired"`
}

func newOperatorMgmtKey(k storage.ManagementKey, now time.Time) operatorMgmtKey {
	v := operatorMgmtKey{
		Hash:          k.Hash,
		AccountID:     k.AccountID,
		Name:          k.Name,
		Label:         k.Label,
		CreatorUserID: k.CreatorUserID,
		CreatedAt:     k.CreatedAt.UTC(),
		Expired:       k.Expired(now),
	}
	if k.ExpiresAt != nil {
		t := k.ExpiresAt.UTC()
		v.ExpiresAt = &t
	}
	return v
}

// Interface guards
var (
	_ caddy.Module      = (*OperatorAPI)(nil)
	_ caddy.Provisioner = (*OperatorAPI)(nil)
	_ caddy.AdminRouter = (*OperatorAPI)(nil)
)
