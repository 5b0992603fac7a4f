package admin

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/connect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/handlers/scimapi"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/policy"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// Admin serves the administrative routes (management key), GET /key and
// the SCIM service, over the tollgate store, for the caller the pipeline's
// authentication identified.
type Admin struct {
	gw     gateway.Gateway
	logger *zap.Logger
	scim   *scimapi.Service // the SCIM 2.0 service under scimapi.Prefix
	// cache purges the response cache's entries; nil: the cache is off.
	cache ResponsePurger
}

// ResponsePurger removes an account's entries from the response cache.
type ResponsePurger interface {
	// PurgeResponses removes the account's entries of model ("": of
	// every model) and counts them.
	PurgeResponses(ctx context.Context, store *storage.Store, account, model string) (int, error)
}

// PurgeWith has the purge route remove the response cache's entries
// through p.
func (a *Admin) PurgeWith(p ResponsePurger) { a.cache = p }

// New is the administrative stage over gw; scimService serves the SCIM
// 2.0 protocol.
func New(gw gateway.Gateway, logger *zap.Logger, scimService *scimapi.Service) *Admin {
	return &Admin{gw: gw, logger: logger, scim: scimService}
}

// now is the resources' clock; tests replace it to cross UTC boundaries.
var now = time.Now

// msgInvalidKey is authentication's 401 message, for a key deleted since.
const msgInvalidKey = "Invalid API key"

// errInternal is the answer to a failure the client cannot act on.
func errInternal() *apierror.Error {
	return apierror.New(http.StatusInternalServerError, "Internal Server Error")
}

// maxAdminBody bounds administrative request bodies.
const maxAdminBody = 1 << 20

// keysPageSize is the key list page size: GET /keys answers at most the
// 100 most recent keys a page.
const keysPageSize = 100

// adminRequest carries what every administrative route needs.
type adminRequest struct {
	w      http.ResponseWriter
	r      *http.Request
	id     *gateway.Identity
	store  *storage.Store
	limits gateway.FreeModelLimits
	gw     gateway.Gateway
	// member, when set, is the organization member the call is made for
	// (ServeForMember): not an admin, so what an admin set on a key is
	// not theirs to change.
	member string
	logger *zap.Logger
	cache  ResponsePurger // nil: the response cache is off
}

// Serve serves an administrative route (or GET /key), as ClassifyRoute
// classified it, for the caller id, with the store the pipeline resolved
// for the request.
func (a *Admin) Serve(w http.ResponseWriter, r *http.Request, store *storage.Store, id *gateway.Identity, api APIRoute) error {
	if (id == nil && api.Kind != RouteKeyless) || store == nil {
		// Unreachable through the pipeline: refuse rather than serve unauthenticated.
		a.logger.Error("administrative route without an identity or a store", zap.String("path", r.URL.Path))
		return apierror.Fail(r, errInternal())
	}
	ar := &adminRequest{w: w, r: r, id: id, store: store, limits: a.gw.FreeModelLimits(), gw: a.gw, logger: a.logger, cache: a.cache}
	apiErr := resolveRoute(r, api).serve(ar)
	if apiErr != nil {
		if apiErr.Status >= 500 {
			a.logger.Error("admin route failed", zap.String("path", r.URL.Path), zap.String("error", apiErr.Message))
		}
		return apierror.Fail(r, apiErr)
	}
	return nil
}

// ServeSCIM serves the SCIM 2.0 service, which answers its own errors in
// SCIM's shape.
func (a *Admin) ServeSCIM(w http.ResponseWriter, r *http.Request) error {
	a.scim.ServeHTTP(w, r)
	return nil
}

// storeError maps store errors to API errors.
func storeError(err error, what string) *apierror.Error {
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return apierror.NotFound(what + " not found")
	case errors.Is(err, storage.ErrInvalid):
		return apierror.BadRequest(strings.TrimPrefix(err.Error(), storage.ErrInvalid.Error()+": "))
	case errors.Is(err, storage.ErrForbidden):
		return apierror.New(http.StatusForbidden, strings.TrimPrefix(err.Error(), storage.ErrForbidden.Error()+": "))
	}
	return apierror.New(http.StatusInternalServerError, "Internal Server Error")
}

func (ar *adminRequest) object() (*reqbody.Fields, *apierror.Error) {
	b, apiErr := reqbody.Read(ar.w, ar.r, maxAdminBody)
	if apiErr != nil {
		return nil, apiErr
	}
	return reqbody.ParseText(b)
}

// ownKey returns one of the caller's account's keys; another account's key
// is reported as missing, not as forbidden, so hashes cannot be probed.
func (ar *adminRequest) ownKey(hash string) (storage.APIKey, *apierror.Error) {
	k, ok := ar.store.APIKey(hash)
	if !ok || k.AccountID != ar.id.AccountID {
		return storage.APIKey{}, apierror.NotFound("API key not found")
	}
	return k, nil
}

func (ar *adminRequest) listKeys() *apierror.Error {
	q := ar.r.URL.Query()
	f := storage.KeyFilter{AccountID: ar.id.AccountID, Limit: keysPageSize}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return apierror.BadRequest("offset: expected a non-negative integer")
		}
		f.Offset = n
	}
	switch v := q.Get("include_disabled"); v {
	case "", "false":
	case "true":
		f.IncludeDisabled = true
	default:
		return apierror.BadRequest("include_disabled: expected true or false")
	}
	f.WorkspaceID = ar.id.Account.DefaultWorkspaceID
	if v := q.Get("workspace_id"); v != "" {
		w, apiErr := ar.workspace(v)
		if apiErr != nil {
			return apiErr
		}
		f.WorkspaceID = w.ID
	}
	t := now()
	keys := ar.store.ListAPIKeys(f)
	out := make([]keyView, len(keys))
	for i, k := range keys {
		out[i] = newKeyView(k, t)
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": out})
	return nil
}

func (ar *adminRequest) createKey() *apierror.Error {
	f, apiErr := ar.object()
	if apiErr != nil {
		return apiErr
	}
	n := storage.NewAPIKey{AccountID: ar.id.AccountID}
	name, ok := f.String("name")
	if f.Err == nil && (!ok || strings.TrimSpace(name) == "") {
		return apierror.BadRequest("name: required non-empty string")
	}
	n.Name = name
	// The fields' second results only say whether a member is present:
	// f.Err holds the first bad value, checked below.
	n.Limit, _ = f.NullableAmount("limit")
	n.LimitReset = ar.limitReset(f)
	n.IncludeBYOKInLimit, _ = f.Bool("include_byok_in_limit")
	n.ExpiresAt, _ = f.NullableTime("expires_at", true)
	n.CreatorUserID, _ = f.NullableString("creator_user_id")
	n.WorkspaceID, _ = f.String("workspace_id")
	n.RateLimits, _ = rateLimits(f, nil)
	n.ByAdmin = ar.member == ""
	if ext, ok := f.Get("external"); ok && ext.Type != gjson.Null {
		user := ext.Get("user")
		if !ext.IsObject() || user.Type != gjson.String {
			return apierror.BadRequest("external.user: expected a string")
		}
		// An end-user id, bounded as every id is.
		if apiErr := reqbody.CheckTextField("external.user", user); apiErr != nil {
			return apiErr
		}
		if user.Str == "" {
			return apierror.BadRequest("external.user: must not be empty")
		}
		n.ExternalUser = &user.Str
	}
	if f.Err != nil {
		return f.Err
	}
	if n.Limit != nil && *n.Limit < 0 {
		return apierror.BadRequest("limit: must not be negative")
	}
	if n.CreatorUserID != nil && *n.CreatorUserID == "" {
		return apierror.BadRequest("creator_user_id: must not be empty")
	}
	if n.ExpiresAt != nil && !n.ExpiresAt.After(now()) {
		return apierror.BadRequest("expires_at: must be in the future")
	}
	k, secret, err := ar.store.CreateAPIKey(n)
	if errors.Is(err, storage.ErrNotFound) {
		return apierror.NotFound("Workspace not found")
	}
	if err != nil {
		return storeError(err, "Account")
	}
	apierror.WriteJSON(ar.w, http.StatusCreated, map[string]any{"data": newKeyView(k, now()), "key": secret})
	return nil
}

// limitReset reads limit_reset: daily, weekly, monthly or null.
func (ar *adminRequest) limitReset(f *reqbody.Fields) money.Interval {
	s, ok := f.NullableString("limit_reset")
	if !ok || s == nil {
		return money.IntervalNone
	}
	iv, valid := money.ParseInterval(*s)
	if !valid && f.Err == nil {
		f.Err = apierror.BadRequest("limit_reset: expected daily, weekly, monthly or null")
	}
	return iv
}

func (ar *adminRequest) getKey(hash string) *apierror.Error {
	k, apiErr := ar.ownKey(hash)
	if apiErr != nil {
		return apiErr
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": newKeyView(k, now())})
	return nil
}

func (ar *adminRequest) updateKey(hash string) *apierror.Error {
	if k, apiErr := ar.ownKey(hash); apiErr != nil {
		return apiErr
	} else if apiErr := connect.ManagedByMember(k); apiErr != nil {
		return apiErr
	}
	f, apiErr := ar.object()
	if apiErr != nil {
		return apiErr
	}
	name, hasName := f.String("name")
	disabled, hasDisabled := f.Bool("disabled")
	incl, hasIncl := f.Bool("include_byok_in_limit")
	limit, hasLimit := f.NullableAmount("limit")
	_, hasReset := f.Get("limit_reset")
	reset := ar.limitReset(f)
	_, hasRates := f.Get("rate_limits")
	if hasRates {
		rateLimits(f, nil) // checked here; applied to the key as it is
	}
	if f.Err != nil {
		return f.Err
	}
	if hasName && strings.TrimSpace(name) == "" {
		return apierror.BadRequest("name: must not be empty")
	}
	if hasLimit && limit != nil && *limit < 0 {
		return apierror.BadRequest("limit: must not be negative")
	}
	k, err := ar.store.UpdateAPIKey(hash, func(k *storage.APIKey) error {
		cur := *k
		reqbody.SetIf(&k.Name, name, hasName)
		reqbody.SetIf(&k.Disabled, disabled, hasDisabled)
		reqbody.SetIf(&k.IncludeBYOKInLimit, incl, hasIncl)
		reqbody.SetIf(&k.Limit, limit, hasLimit)
		reqbody.SetIf(&k.LimitReset, reset, hasReset)
		if hasRates {
			k.RateLimits, _ = rateLimits(f, k.RateLimits)
		}
		return storage.CheckKeyChange(cur, k, ar.member == "")
	})
	if err != nil {
		return storeError(err, "API key")
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": newKeyView(k, now())})
	return nil
}

func (ar *adminRequest) deleteKey(hash string) *apierror.Error {
	if k, apiErr := ar.ownKey(hash); apiErr != nil {
		return apiErr
	} else if apiErr := connect.ManagedByMember(k); apiErr != nil {
		return apiErr
	}
	if err := ar.store.DeleteAPIKey(hash); err != nil {
		return storeError(err, "API key")
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"deleted": true})
	return nil
}

// currentKey answers GET /key for the calling key.
func (ar *adminRequest) currentKey() *apierror.Error {
	t := now()
	acct, ok := ar.store.Account(ar.id.AccountID)
	if !ok {
		return apierror.NotFound("Account not found")
	}
	daily := ar.limits.DailyLimit(acct)
	used := acct.FreeModelRequestsToday(t)
	v := currentKeyView{
		IsFreeTier:             acct.Purchases == 0,
		FreeModelDailyRequests: freeModelDailyView{Used: used, Limit: daily, Remaining: max(daily-used, 0)},
		RateLimit:              rateLimitView{Requests: -1, Interval: "10s", Note: "This field is deprecated and safe to ignore."},
	}
	if acct.Kind == storage.AccountOrganization {
		v.OrganizationID = &acct.ID
	}
	var rules *storage.Rules // none for a management key: it does no inference
	if ar.id.Management {
		m := ar.id.MgmtKey
		v.Label, v.IsManagementKey, v.IsProvisioningKey = m.Label, true, true
		v.CreatorUserID, v.ExpiresAt = m.CreatorUserID, apiTimePtr(m.ExpiresAt)
	} else {
		k, ok := ar.store.APIKey(ar.id.Hash)
		if !ok {
			return apierror.New(http.StatusUnauthorized, msgInvalidKey)
		}
		v.Label, v.Limit, v.LimitRemaining, v.LimitReset = k.Label, k.Limit, k.LimitRemaining(t), intervalPtr(k.LimitReset)
		v.IncludeBYOKInLimit, v.counterView = k.IncludeBYOKInLimit, countersAt(k, t)
		v.CreatorUserID, v.ExpiresAt, v.WorkspaceID = k.CreatorUserID, apiTimePtr(k.ExpiresAt), &k.WorkspaceID
		rules = ar.store.EffectiveRules(k.Hash)
		if k.RateLimits.Any() {
			var snap storage.Snapshot
			if err := ar.store.Snapshot(&snap, k.AccountID, k.Hash, 0); err == nil {
				ar.store.Abandon(&snap)
				v.RateLimits = rateLeft(k.RateLimits, snap.View.KeyRate, snap.View.Now)
			}
		}
	}
	v.AllowedDataRegions = policy.AllowedDataRegions(rules)
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": v})
	return nil
}

// orgAccount returns the caller's account if it is an organization: a
// personal account's management key gets 404, since a personal account
// has no organization resources.
func (ar *adminRequest) orgAccount() (storage.Account, *apierror.Error) {
	acct, ok := ar.store.Account(ar.id.AccountID)
	if !ok || acct.Kind != storage.AccountOrganization {
		return storage.Account{}, apierror.NotFound("Organization not found: this management key belongs to a personal account")
	}
	return acct, nil
}

func (ar *adminRequest) orgSettings() *apierror.Error {
	acct, apiErr := ar.orgAccount()
	if apiErr != nil {
		return apiErr
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": orgSettingsView{ID: acct.ID, IsFilteredModelCatalogEnabled: acct.FilteredModelCatalog}})
	return nil
}

func (ar *adminRequest) updateOrgSettings() *apierror.Error {
	if _, apiErr := ar.orgAccount(); apiErr != nil {
		return apiErr
	}
	f, apiErr := ar.object()
	if apiErr != nil {
		return apiErr
	}
	enabled, ok := f.Bool("is_filtered_model_catalog_enabled")
	if f.Err != nil {
		return f.Err
	}
	if !ok {
		return apierror.BadRequest("is_filtered_model_catalog_enabled: required boolean")
	}
	acct, err := ar.store.UpdateAccount(ar.id.AccountID, func(a *storage.Account) error {
		a.FilteredModelCatalog = enabled
		return nil
	})
	if err != nil {
		return storeError(err, "Organization")
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": orgSettingsView{ID: acct.ID, IsFilteredModelCatalogEnabled: acct.FilteredModelCatalog}})
	return nil
}

func (ar *adminRequest) credits() *apierror.Error {
	acct, ok := ar.store.Account(ar.id.AccountID)
	if !ok {
		return apierror.NotFound("Account not found")
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": map[string]money.Amount{
		"total_credits": acct.CreditsPurchased,
		"total_usage":   acct.Usage,
	}})
	return nil
}
