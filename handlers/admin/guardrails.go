package admin

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/policy"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// Guardrails restrict the keys and members they are assigned to:
// /api/v1/guardrails and below, with a management key. Package policy
// decides what they admit (router: models and providers; meter: budgets).

// guardrailView is a guardrail as the public schema has it.
type guardrailView struct {
	ID                         string          `json:"id"`
	Name                       string          `json:"name"`
	Description                *string         `json:"description"`
	WorkspaceID                string          `json:"workspace_id"`
	AllowedModels              []string        `json:"allowed_models"`
	AllowedProviders           []string        `json:"allowed_providers"`
	IgnoredModels              []string        `json:"ignored_models"`
	IgnoredProviders           []string        `json:"ignored_providers"`
	AllowedDataRegions         []string        `json:"allowed_data_regions"`
	ContentFilters             json.RawMessage `json:"content_filters"`
	ContentFilterBuiltins      json.RawMessage `json:"content_filter_builtins"`
	EnableFreeModelPublication *bool           `json:"enable_free_model_publication"`
	EnableFreeModelTraining    *bool           `json:"enable_free_model_training"`
	EnablePaidModelTraining    *bool           `json:"enable_paid_model_training"`
	EnforceZDR                 *bool           `json:"enforce_zdr"`
	EnforceZDRAnthropic        *bool           `json:"enforce_zdr_anthropic"`
	EnforceZDRGoogle           *bool           `json:"enforce_zdr_google"`
	EnforceZDROpenAI           *bool           `json:"enforce_zdr_openai"`
	EnforceZDROther            *bool           `json:"enforce_zdr_other"`
	EnforceZDRXAI              *bool           `json:"enforce_zdr_xai"`
	IncludeBYOKInBudgets       bool            `json:"include_byok_in_budgets"`
	LimitUSD                   *money.Amount   `json:"limit_usd"`
	ResetInterval              *string         `json:"reset_interval"`
	CreatedAt                  string          `json:"created_at"`
	UpdatedAt                  *string         `json:"updated_at"`
}

func rawOrNull(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return json.RawMessage("null")
	}
	return r
}

func newGuardrailView(g storage.Guardrail) guardrailView {
	return guardrailView{
		ID: g.ID, Name: g.Name, Description: g.Description, WorkspaceID: g.WorkspaceID,
		AllowedModels: g.AllowedModels, AllowedProviders: g.AllowedProviders,
		IgnoredModels: g.IgnoredModels, IgnoredProviders: g.IgnoredProviders,
		AllowedDataRegions: g.AllowedDataRegions,
		ContentFilters:     rawOrNull(g.ContentFilters), ContentFilterBuiltins: rawOrNull(g.ContentFilterBuiltins),
		EnableFreeModelPublication: g.EnableFreeModelPublication, EnableFreeModelTraining: g.EnableFreeModelTraining,
		EnablePaidModelTraining: g.EnablePaidModelTraining, EnforceZDR: g.EnforceZDR,
		EnforceZDRAnthropic: g.EnforceZDRAnthropic, EnforceZDRGoogle: g.EnforceZDRGoogle,
		EnforceZDROpenAI: g.EnforceZDROpenAI, EnforceZDROther: g.EnforceZDROther, EnforceZDRXAI: g.EnforceZDRXAI,
		IncludeBYOKInBudgets: g.IncludeBYOKInBudgets, LimitUSD: g.Limit, ResetInterval: intervalPtr(g.ResetInterval),
		CreatedAt: apiTime(g.CreatedAt), UpdatedAt: apiTimePtr(g.UpdatedAt),
	}
}

type keyAssignmentView struct {
	ID          string  `json:"id"`
	GuardrailID string  `json:"guardrail_id"`
	KeyHash     string  `json:"key_hash"`
	KeyLabel    string  `json:"key_label"`
	KeyName     string  `json:"key_name"`
	AssignedBy  *string `json:"assigned_by"`
	CreatedAt   string  `json:"created_at"`
}

type memberAssignmentView struct {
	ID             string  `json:"id"`
	GuardrailID    string  `json:"guardrail_id"`
	OrganizationID string  `json:"organization_id"`
	UserID         string  `json:"user_id"`
	AssignedBy     *string `json:"assigned_by"`
	CreatedAt      string  `json:"created_at"`
}

// The assignment routes of a guardrail: the body field names the keys or
// the members; without a guardrail id, the lists cover every guardrail.

func (ar *adminRequest) assignKeys(id string) *apierror.Error {
	return ar.assign(id, "key_hashes", ar.store.AssignKeys)
}

func (ar *adminRequest) unassignKeys(id string) *apierror.Error {
	return ar.unassign(id, "key_hashes", ar.store.UnassignKeys)
}

func (ar *adminRequest) assignMembers(id string) *apierror.Error {
	return ar.assign(id, "member_user_ids", ar.store.AssignMembers)
}

func (ar *adminRequest) unassignMembers(id string) *apierror.Error {
	return ar.unassign(id, "member_user_ids", ar.store.UnassignMembers)
}

func (ar *adminRequest) listAllKeyAssignments() *apierror.Error { return ar.listKeyAssignments("") }

func (ar *adminRequest) listAllMemberAssignments() *apierror.Error {
	return ar.listMemberAssignments("")
}

func (ar *adminRequest) listGuardrails() *apierror.Error {
	offset, limit, apiErr := ar.page()
	if apiErr != nil {
		return apiErr
	}
	wsID := ar.id.Account.DefaultWorkspaceID
	if v := ar.r.URL.Query().Get("workspace_id"); v != "" {
		w, apiErr := ar.workspace(v)
		if apiErr != nil {
			return apiErr
		}
		wsID = w.ID
	}
	all := ar.store.Guardrails(ar.id.AccountID, wsID)
	writePage(ar.w, all, offset, limit, newGuardrailView)
	return nil
}

// guardrailSettings reads the writable fields of a guardrail into g.
func guardrailSettings(f *reqbody.Fields, g *storage.Guardrail, create, workspaceDefault bool) *apierror.Error {
	name, hasName := f.String("name")
	desc, hasDesc := f.NullableString("description")
	// In the order of the public schema, so that the first bad field is
	// the one reported.
	for _, x := range []struct {
		field string
		dst   *[]string
	}{
		{"allowed_data_regions", &g.AllowedDataRegions}, {"allowed_models", &g.AllowedModels},
		{"allowed_providers", &g.AllowedProviders}, {"ignored_models", &g.IgnoredModels},
		{"ignored_providers", &g.IgnoredProviders},
	} {
		v, ok := f.NullableStrings(x.field)
		reqbody.SetIf(x.dst, v, ok)
	}
	for _, x := range []struct {
		field string
		dst   *json.RawMessage
	}{{"content_filter_builtins", &g.ContentFilterBuiltins}, {"content_filters", &g.ContentFilters}} {
		v, ok := f.NullableRaw(x.field)
		reqbody.SetIf(x.dst, v, ok)
	}
	for _, x := range []struct {
		field string
		dst   **bool
	}{
		{"enable_free_model_publication", &g.EnableFreeModelPublication}, {"enable_free_model_training", &g.EnableFreeModelTraining},
		{"enable_paid_model_training", &g.EnablePaidModelTraining}, {"enforce_zdr", &g.EnforceZDR},
		{"enforce_zdr_anthropic", &g.EnforceZDRAnthropic}, {"enforce_zdr_google", &g.EnforceZDRGoogle},
		{"enforce_zdr_openai", &g.EnforceZDROpenAI}, {"enforce_zdr_other", &g.EnforceZDROther}, {"enforce_zdr_xai", &g.EnforceZDRXAI},
	} {
		v, ok := f.NullableBool(x.field)
		reqbody.SetIf(x.dst, v, ok)
	}
	incl, hasIncl := f.Bool("include_byok_in_budgets")
	limit, hasLimit := f.NullableAmount("limit_usd")
	reset, hasReset := f.NullableString("reset_interval")
	if f.Err != nil {
		return f.Err
	}
	if v, ok := f.Get("allowed_data_regions"); ok && v.IsArray() {
		for _, r := range g.AllowedDataRegions {
			if !slices.Contains(policy.DataRegions[:], r) {
				return apierror.BadRequest("allowed_data_regions: expected global, europe or us")
			}
		}
	}
	if create && (!hasName || strings.TrimSpace(name) == "") {
		return apierror.BadRequest("name: required non-empty string")
	}
	if workspaceDefault && hasName && name != g.Name {
		return apierror.BadRequest("name: a workspace default guardrail's name is derived from its workspace and cannot be changed")
	}
	if hasLimit && limit != nil && *limit < 0 {
		return apierror.BadRequest("limit_usd: must not be negative")
	}
	iv := money.IntervalNone
	if hasReset && reset != nil {
		var ok bool
		if iv, ok = money.ParseInterval(*reset); !ok {
			return apierror.BadRequest("reset_interval: expected daily, weekly, monthly or null")
		}
	}
	reqbody.SetIf(&g.Name, name, hasName)
	reqbody.SetIf(&g.Description, desc, hasDesc)
	reqbody.SetIf(&g.IncludeBYOKInBudgets, incl, hasIncl)
	reqbody.SetIf(&g.Limit, limit, hasLimit)
	reqbody.SetIf(&g.ResetInterval, iv, hasReset)
	if g.Limit != nil && g.ResetInterval == money.IntervalNone {
		return apierror.BadRequest("reset_interval: required with limit_usd (daily, weekly or monthly)")
	}
	return nil
}

func (ar *adminRequest) createGuardrail() *apierror.Error {
	f, apiErr := ar.object()
	if apiErr != nil {
		return apiErr
	}
	wsRef, hasWS := f.String("workspace_id")
	if f.Err != nil {
		return f.Err
	}
	wsID := ""
	if hasWS {
		w, apiErr := ar.workspace(wsRef)
		if apiErr != nil {
			return apierror.BadRequest("workspace_id: no such workspace")
		}
		wsID = w.ID
	}
	var set *apierror.Error
	g, err := ar.store.CreateGuardrail(ar.id.AccountID, func(g *storage.Guardrail) error {
		g.WorkspaceID = wsID
		if set = guardrailSettings(f, g, true, false); set != nil {
			return storage.ErrInvalid
		}
		return nil
	})
	return ar.answerGuardrail(http.StatusCreated, g, set, err)
}

// answerGuardrail answers a guardrail write: a refused setting first, then
// the store's error, else the guardrail with status.
func (ar *adminRequest) answerGuardrail(status int, g storage.Guardrail, set *apierror.Error, err error) *apierror.Error {
	if set != nil {
		return set
	}
	if err != nil {
		return orgStoreError(err, "Guardrail")
	}
	apierror.WriteJSON(ar.w, status, map[string]any{"data": newGuardrailView(g)})
	return nil
}

func (ar *adminRequest) getGuardrail(id string) *apierror.Error {
	g, ok := ar.store.Guardrail(ar.id.AccountID, id)
	if !ok {
		return apierror.NotFound("Guardrail not found")
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": newGuardrailView(g)})
	return nil
}

func (ar *adminRequest) updateGuardrail(id string) *apierror.Error {
	f, apiErr := ar.object()
	if apiErr != nil {
		return apiErr
	}
	var set *apierror.Error
	g, _, err := ar.store.UpdateGuardrail(ar.id.AccountID, id, func(g *storage.Guardrail, workspaceDefault bool) error {
		if set = guardrailSettings(f, g, false, workspaceDefault); set != nil {
			return storage.ErrInvalid
		}
		return nil
	})
	return ar.answerGuardrail(http.StatusOK, g, set, err)
}

func (ar *adminRequest) deleteGuardrail(id string) *apierror.Error {
	if err := ar.store.DeleteGuardrail(ar.id.AccountID, id); err != nil {
		return orgStoreError(err, "Guardrail")
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"deleted": true})
	return nil
}

func (ar *adminRequest) ownGuardrail(id string) *apierror.Error {
	if _, ok := ar.store.Guardrail(ar.id.AccountID, id); !ok {
		return apierror.NotFound("Guardrail not found")
	}
	return nil
}

// assignmentsPage checks the guardrail of an assignment list (id "": the
// assignments of every guardrail) and reads the page.
func (ar *adminRequest) assignmentsPage(id string) (offset, limit int, apiErr *apierror.Error) {
	if id != "" {
		if apiErr := ar.ownGuardrail(id); apiErr != nil {
			return 0, 0, apiErr
		}
	}
	return ar.page()
}

func (ar *adminRequest) listKeyAssignments(id string) *apierror.Error {
	offset, limit, apiErr := ar.assignmentsPage(id)
	if apiErr != nil {
		return apiErr
	}
	all := ar.store.KeyAssignments(ar.id.AccountID, id)
	writePage(ar.w, all, offset, limit, func(a storage.KeyAssignment) keyAssignmentView {
		return keyAssignmentView{ID: a.ID, GuardrailID: a.GuardrailID, KeyHash: a.Key.Hash,
			KeyLabel: a.Key.Label, KeyName: a.Key.Name, AssignedBy: a.AssignedBy, CreatedAt: apiTime(a.CreatedAt)}
	})
	return nil
}

func (ar *adminRequest) listMemberAssignments(id string) *apierror.Error {
	offset, limit, apiErr := ar.assignmentsPage(id)
	if apiErr != nil {
		return apiErr
	}
	all := ar.store.MemberAssignments(ar.id.AccountID, id)
	writePage(ar.w, all, offset, limit, func(a storage.MemberAssignment) memberAssignmentView {
		return memberAssignmentView{ID: a.ID, GuardrailID: a.GuardrailID, OrganizationID: ar.id.AccountID,
			UserID: a.UserID, AssignedBy: a.AssignedBy, CreatedAt: apiTime(a.CreatedAt)}
	})
	return nil
}

func (ar *adminRequest) assign(id, field string, fn func(accountID, id string, ids []string, by *string) (int, error)) *apierror.Error {
	f, apiErr := ar.object()
	if apiErr != nil {
		return apiErr
	}
	ids := f.Strings(field)
	if f.Err != nil {
		return f.Err
	}
	n, err := fn(ar.id.AccountID, id, ids, ar.creatorOf())
	if err != nil {
		return orgStoreError(err, "Guardrail")
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"assigned_count": n})
	return nil
}

func (ar *adminRequest) unassign(id, field string, fn func(accountID, id string, ids []string) (int, error)) *apierror.Error {
	f, apiErr := ar.object()
	if apiErr != nil {
		return apiErr
	}
	ids := f.Strings(field)
	if f.Err != nil {
		return f.Err
	}
	n, err := fn(ar.id.AccountID, id, ids)
	if err != nil {
		return orgStoreError(err, "Guardrail")
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"unassigned_count": n})
	return nil
}
