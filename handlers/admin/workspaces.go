package admin

import (
	"net/http"
	"strings"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// Workspaces divide an account's keys: /api/v1/workspaces and below, with a
// management key. {id} (or {workspace_ref}) is a workspace's id or slug.

// workspaceView is a workspace as the public schema has it.
type workspaceView struct {
	ID                              string   `json:"id"`
	Name                            string   `json:"name"`
	Slug                            string   `json:"slug"`
	Description                     *string  `json:"description"`
	CreatedBy                       *string  `json:"created_by"`
	DefaultGuardrailID              string   `json:"default_guardrail_id"`
	DefaultImageModel               *string  `json:"default_image_model"`
	DefaultProviderSort             *string  `json:"default_provider_sort"`
	DefaultTextModel                *string  `json:"default_text_model"`
	DisabledServerTools             []string `json:"disabled_server_tools"`
	IncludeBYOKInBudgets            bool     `json:"include_byok_in_budgets"`
	IOLoggingAPIKeyIDs              []int64  `json:"io_logging_api_key_ids"`
	IOLoggingSamplingRate           float64  `json:"io_logging_sampling_rate"`
	IsDataDiscountLoggingEnabled    bool     `json:"is_data_discount_logging_enabled"`
	IsObservabilityBroadcastEnabled bool     `json:"is_observability_broadcast_enabled"`
	IsObservabilityIOLoggingEnabled bool     `json:"is_observability_io_logging_enabled"`
	CreatedAt                       string   `json:"created_at"`
	UpdatedAt                       *string  `json:"updated_at"`
	// RateLimits are the pooled rate limits of the workspace's keys;
	// absent when it sets none.
	RateLimits *rateLimitsView `json:"rate_limits,omitempty"`
}

func newWorkspaceView(w storage.Workspace) workspaceView {
	return workspaceView{
		ID: w.ID, Name: w.Name, Slug: w.Slug, Description: w.Description, CreatedBy: w.CreatedBy,
		DefaultGuardrailID: w.DefaultGuardrailID, DefaultImageModel: w.DefaultImageModel,
		DefaultProviderSort: w.DefaultProviderSort, DefaultTextModel: w.DefaultTextModel,
		DisabledServerTools: w.DisabledServerTools, IncludeBYOKInBudgets: w.IncludeBYOKInBudgets,
		IOLoggingAPIKeyIDs: w.IOLoggingAPIKeyIDs, IOLoggingSamplingRate: w.IOLoggingSamplingRate,
		IsDataDiscountLoggingEnabled:    w.IsDataDiscountLoggingEnabled,
		IsObservabilityBroadcastEnabled: w.IsObservabilityBroadcastEnabled,
		IsObservabilityIOLoggingEnabled: w.IsObservabilityIOLoggingEnabled,
		CreatedAt:                       apiTime(w.CreatedAt), UpdatedAt: apiTimePtr(w.UpdatedAt),
		RateLimits: newRateLimitsView(w.RateLimits),
	}
}

// workspaceMemberView is a workspace membership.
type workspaceMemberView struct {
	ID          string `json:"id"`
	UserID      string `json:"user_id"`
	WorkspaceID string `json:"workspace_id"`
	Role        string `json:"role"`
	CreatedAt   string `json:"created_at"`
}

func newWorkspaceMemberView(wsID string, m storage.WorkspaceMember) workspaceMemberView {
	return workspaceMemberView{ID: storage.MembershipID(wsID, m.UserID), UserID: m.UserID, WorkspaceID: wsID,
		Role: string(m.Role), CreatedAt: apiTime(m.CreatedAt)}
}

// budgetView is a workspace budget.
type budgetView struct {
	ID            string       `json:"id"`
	WorkspaceID   string       `json:"workspace_id"`
	LimitUSD      money.Amount `json:"limit_usd"`
	ResetInterval *string      `json:"reset_interval"`
	CreatedAt     string       `json:"created_at"`
	UpdatedAt     string       `json:"updated_at"`
}

func newBudgetView(wsID string, b storage.WorkspaceBudget) budgetView {
	return budgetView{ID: b.ID, WorkspaceID: wsID, LimitUSD: b.Limit, ResetInterval: intervalPtr(b.Interval.Interval()),
		CreatedAt: apiTime(b.CreatedAt), UpdatedAt: apiTime(b.UpdatedAt)}
}

func (ar *adminRequest) workspace(ref string) (storage.Workspace, *apierror.Error) {
	w, ok := ar.store.Workspace(ar.id.AccountID, ref)
	if !ok {
		return storage.Workspace{}, apierror.NotFound("Workspace not found")
	}
	return w, nil
}

func (ar *adminRequest) listWorkspaces() *apierror.Error {
	offset, limit, apiErr := ar.page()
	if apiErr != nil {
		return apiErr
	}
	all := ar.store.Workspaces(ar.id.AccountID)
	writePage(ar.w, all, offset, limit, newWorkspaceView)
	return nil
}

// workspaceSettings reads the writable fields of a workspace into w.
// create requires name and slug.
func workspaceSettings(f *reqbody.Fields, w *storage.Workspace, create bool) *apierror.Error {
	name, hasName := f.String("name")
	slug, hasSlug := f.String("slug")
	desc, hasDesc := f.NullableString("description")
	img, hasImg := f.NullableString("default_image_model")
	sort, hasSort := f.NullableString("default_provider_sort")
	text, hasText := f.NullableString("default_text_model")
	tools, hasTools := f.NullableStrings("disabled_server_tools")
	ids, hasIDs := f.NullableInts("io_logging_api_key_ids")
	rate, hasRate := f.Number("io_logging_sampling_rate")
	dd, hasDD := f.Bool("is_data_discount_logging_enabled")
	ob, hasOB := f.Bool("is_observability_broadcast_enabled")
	oio, hasOIO := f.Bool("is_observability_io_logging_enabled")
	limits, _ := rateLimits(f, w.RateLimits)
	if f.Err != nil {
		return f.Err
	}
	w.RateLimits = limits
	if create && (!hasName || strings.TrimSpace(name) == "") {
		return apierror.BadRequest("name: required non-empty string")
	}
	if create && !hasSlug {
		return apierror.BadRequest("slug: required string")
	}
	if hasRate && (rate < 0 || rate > 1) {
		return apierror.BadRequest("io_logging_sampling_rate: expected a number from 0 to 1")
	}
	reqbody.SetIf(&w.Name, name, hasName)
	reqbody.SetIf(&w.Slug, slug, hasSlug)
	reqbody.SetIf(&w.Description, desc, hasDesc)
	reqbody.SetIf(&w.DefaultImageModel, img, hasImg)
	reqbody.SetIf(&w.DefaultProviderSort, sort, hasSort)
	reqbody.SetIf(&w.DefaultTextModel, text, hasText)
	reqbody.SetIf(&w.DisabledServerTools, tools, hasTools)
	reqbody.SetIf(&w.IOLoggingAPIKeyIDs, ids, hasIDs)
	reqbody.SetIf(&w.IOLoggingSamplingRate, rate, hasRate)
	reqbody.SetIf(&w.IsDataDiscountLoggingEnabled, dd, hasDD)
	reqbody.SetIf(&w.IsObservabilityBroadcastEnabled, ob, hasOB)
	reqbody.SetIf(&w.IsObservabilityIOLoggingEnabled, oio, hasOIO)
	return nil
}

func (ar *adminRequest) createWorkspace() *apierror.Error {
	f, apiErr := ar.object()
	if apiErr != nil {
		return apiErr
	}
	var w storage.Workspace
	if apiErr := workspaceSettings(f, &w, true); apiErr != nil {
		return apiErr
	}
	w, err := ar.store.CreateWorkspace(ar.id.AccountID, func(n *storage.Workspace) {
		id, guardrail, created := n.ID, n.DefaultGuardrailID, n.CreatedAt
		budgets, members := n.Budgets, n.Members
		*n = w
		n.ID, n.AccountID, n.DefaultGuardrailID, n.CreatedAt = id, ar.id.AccountID, guardrail, created
		n.Budgets, n.Members, n.CreatedBy = budgets, members, ar.creatorOf()
		if _, set := f.Get("io_logging_sampling_rate"); !set {
			n.IOLoggingSamplingRate = 1
		}
		if _, set := f.Get("is_data_discount_logging_enabled"); !set {
			n.IsDataDiscountLoggingEnabled = true
		}
	})
	if err != nil {
		return orgStoreError(err, "Account")
	}
	apierror.WriteJSON(ar.w, http.StatusCreated, map[string]any{"data": newWorkspaceView(w)})
	return nil
}

func (ar *adminRequest) getWorkspace(ref string) *apierror.Error {
	w, apiErr := ar.workspace(ref)
	if apiErr != nil {
		return apiErr
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": newWorkspaceView(w)})
	return nil
}

func (ar *adminRequest) updateWorkspace(ref string) *apierror.Error {
	if _, apiErr := ar.workspace(ref); apiErr != nil {
		return apiErr
	}
	f, apiErr := ar.object()
	if apiErr != nil {
		return apiErr
	}
	var upd *apierror.Error
	w, err := ar.store.UpdateWorkspace(ar.id.AccountID, ref, func(w *storage.Workspace) error {
		if upd = workspaceSettings(f, w, false); upd != nil {
			return storage.ErrInvalid
		}
		return nil
	})
	if upd != nil {
		return upd
	}
	if err != nil {
		return orgStoreError(err, "Workspace")
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": newWorkspaceView(w)})
	return nil
}

func (ar *adminRequest) deleteWorkspace(ref string) *apierror.Error {
	if err := ar.store.DeleteWorkspace(ar.id.AccountID, ref); err != nil {
		return orgStoreError(err, "Workspace")
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"deleted": true})
	return nil
}

func (ar *adminRequest) listWorkspaceMembers(ref string) *apierror.Error {
	offset, limit, apiErr := ar.page()
	if apiErr != nil {
		return apiErr
	}
	all, w, err := ar.store.WorkspaceMembers(ar.id.AccountID, ref)
	if err != nil {
		return apierror.NotFound("Workspace not found")
	}
	writePage(ar.w, all, offset, limit, func(m storage.WorkspaceMember) workspaceMemberView {
		return newWorkspaceMemberView(w.ID, m)
	})
	return nil
}

// workspaceUserIDs finds the workspace of a membership change and reads
// the body's user_ids.
func (ar *adminRequest) workspaceUserIDs(ref string) (storage.Workspace, []string, *apierror.Error) {
	w, apiErr := ar.workspace(ref)
	if apiErr != nil {
		return storage.Workspace{}, nil, apiErr
	}
	f, apiErr := ar.object()
	if apiErr != nil {
		return storage.Workspace{}, nil, apiErr
	}
	ids := f.Strings("user_ids")
	return w, ids, f.Err
}

func (ar *adminRequest) addWorkspaceMembers(ref string) *apierror.Error {
	w, ids, apiErr := ar.workspaceUserIDs(ref)
	if apiErr != nil {
		return apiErr
	}
	added, err := ar.store.AddWorkspaceMembers(ar.id.AccountID, w.ID, ids)
	if err != nil {
		return orgStoreError(err, "Workspace")
	}
	out := make([]workspaceMemberView, 0, len(added))
	for _, m := range added {
		out = append(out, newWorkspaceMemberView(w.ID, m))
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"added_count": len(added), "data": out})
	return nil
}

func (ar *adminRequest) removeWorkspaceMembers(ref string) *apierror.Error {
	w, ids, apiErr := ar.workspaceUserIDs(ref)
	if apiErr != nil {
		return apiErr
	}
	n, err := ar.store.RemoveWorkspaceMembers(ar.id.AccountID, w.ID, ids)
	if err != nil {
		return orgStoreError(err, "Workspace")
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"removed_count": n})
	return nil
}

func (ar *adminRequest) listBudgets(ref string) *apierror.Error {
	w, apiErr := ar.workspace(ref)
	if apiErr != nil {
		return apiErr
	}
	out := []budgetView{}
	for _, b := range w.SortedBudgets() {
		out = append(out, newBudgetView(w.ID, b))
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": out, "include_byok_in_budgets": w.IncludeBYOKInBudgets})
	return nil
}

func budgetInterval(s string) (storage.BudgetInterval, *apierror.Error) {
	iv, ok := storage.ParseBudgetInterval(s)
	if !ok {
		return "", apierror.BadRequest("interval: expected daily, weekly, monthly or lifetime")
	}
	return iv, nil
}

func (ar *adminRequest) getBudget(ref, interval string) *apierror.Error {
	iv, apiErr := budgetInterval(interval)
	if apiErr != nil {
		return apiErr
	}
	w, apiErr := ar.workspace(ref)
	if apiErr != nil {
		return apiErr
	}
	b, ok := w.Budgets[iv]
	if !ok {
		return apierror.NotFound("No " + string(iv) + " budget is set for this workspace")
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": newBudgetView(w.ID, *b), "include_byok_in_budgets": w.IncludeBYOKInBudgets})
	return nil
}

func (ar *adminRequest) setBudget(ref, interval string) *apierror.Error {
	iv, apiErr := budgetInterval(interval)
	if apiErr != nil {
		return apiErr
	}
	if _, apiErr := ar.workspace(ref); apiErr != nil {
		return apiErr
	}
	f, apiErr := ar.object()
	if apiErr != nil {
		return apiErr
	}
	limit, hasLimit := f.NullableAmount("limit_usd")
	incl, hasIncl := f.Bool("include_byok_in_budgets")
	if f.Err != nil {
		return f.Err
	}
	if !hasLimit || limit == nil {
		return apierror.BadRequest("limit_usd: required number")
	}
	var inclPtr *bool
	if hasIncl {
		inclPtr = &incl
	}
	w, b, err := ar.store.SetWorkspaceBudget(ar.id.AccountID, ref, iv, *limit, inclPtr)
	if err != nil {
		return orgStoreError(err, "Workspace")
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": newBudgetView(w.ID, b), "include_byok_in_budgets": w.IncludeBYOKInBudgets})
	return nil
}

func (ar *adminRequest) deleteBudget(ref, interval string) *apierror.Error {
	iv, apiErr := budgetInterval(interval)
	if apiErr != nil {
		return apiErr
	}
	if _, apiErr := ar.workspace(ref); apiErr != nil {
		return apiErr
	}
	if err := ar.store.DeleteWorkspaceBudget(ar.id.AccountID, ref, iv); err != nil {
		return orgStoreError(err, "Workspace budget")
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"deleted": true})
	return nil
}
