package admin

import (
	"errors"
	"go.uber.org/zap"
	"net/http"
	"strings"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/scim"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// The SCIM management routes (management key), under /api/v1/scim:
//
//	GET, POST          /scim/group-mappings
//	GET, PATCH, DELETE /scim/group-mappings/{id}   (DELETE requires keep_members)
//	GET                /scim/groups
//	POST               /scim/sync-jobs              (202; the job runs asynchronously)
//	GET                /scim/sync-jobs/{id}
//
// The SCIM 2.0 service itself, which the identity provider calls, is
// package scimapi; the store of the SCIM records is package scim.

type scimGroupView struct {
	ID             string  `json:"id"`
	OrganizationID string  `json:"organization_id"`
	ExternalID     *string `json:"external_id"`
	DisplayName    string  `json:"display_name"`
	MemberCount    int     `json:"member_count"`
	CreatedAt      string  `json:"created_at"`
	UpdatedAt      string  `json:"updated_at"`
}

func newSCIMGroupView(g scim.Group) scimGroupView {
	return scimGroupView{ID: g.ID, OrganizationID: g.AccountID, ExternalID: g.ExternalID, DisplayName: g.DisplayName,
		MemberCount: len(g.Members), CreatedAt: apiTime(g.CreatedAt), UpdatedAt: apiTime(g.UpdatedAt)}
}

type scimMappingView struct {
	ID             string `json:"id"`
	OrganizationID string `json:"organization_id"`
	SCIMGroupID    string `json:"scim_group_id"`
	WorkspaceID    string `json:"workspace_id"`
	Role           string `json:"role"`
	CreatedAt      string `json:"created_at"`
	UpdatedAt      string `json:"updated_at"`
}

func newSCIMMappingView(m scim.GroupMapping) scimMappingView {
	return scimMappingView{ID: m.ID, OrganizationID: m.AccountID, SCIMGroupID: m.GroupID, WorkspaceID: m.WorkspaceID,
		Role: string(m.Role), CreatedAt: apiTime(m.CreatedAt), UpdatedAt: apiTime(m.UpdatedAt)}
}

type scimSyncJobView struct {
	ID                 string  `json:"id"`
	Status             string  `json:"status"`
	ErrorMessage       *string `json:"error_message"`
	SyncedGroups       *int    `json:"synced_groups"`
	DeletedGroups      *int    `json:"deleted_groups"`
	AddedMemberships   *int    `json:"added_memberships"`
	UpdatedMemberships *int    `json:"updated_memberships"`
	RemovedMemberships *int    `json:"removed_memberships"`
	KeptMemberships    *int    `json:"kept_memberships"`
	CreatedAt          string  `json:"created_at"`
	StartedAt          *string `json:"started_at"`
	FinishedAt         *string `json:"finished_at"`
}

func newSCIMSyncJobView(j scim.SyncJob) scimSyncJobView {
	return scimSyncJobView{ID: j.ID, Status: j.Status, ErrorMessage: j.ErrorMessage, SyncedGroups: j.SyncedGroups,
		DeletedGroups: j.DeletedGroups, AddedMemberships: j.Added, UpdatedMemberships: j.Updated,
		RemovedMemberships: j.Removed, KeptMemberships: j.Kept, CreatedAt: apiTime(j.CreatedAt),
		StartedAt: apiTimePtr(j.StartedAt), FinishedAt: apiTimePtr(j.FinishedAt)}
}

// scimStoreError maps store errors of the SCIM routes: a duplicate mapping
// is 409, as the reference has it.
func scimStoreError(err error, what string) *apierror.Error {
	if errors.Is(err, storage.ErrConflict) {
		return apierror.New(http.StatusConflict, strings.TrimPrefix(err.Error(), storage.ErrConflict.Error()+": "))
	}
	return orgStoreError(err, what)
}

// scim is the store of the SCIM records.
func (ar *adminRequest) scim() *scim.Store { return scim.StoreOf(ar.store) }

func (ar *adminRequest) listSCIMMappings() *apierror.Error {
	offset, limit, apiErr := ar.page()
	if apiErr != nil {
		return apiErr
	}
	writePage(ar.w, ar.scim().GroupMappings(ar.id.AccountID), offset, limit, newSCIMMappingView)
	return nil
}

func roleOf(f *reqbody.Fields) (storage.MemberRole, bool) {
	s, ok := f.String("role")
	if !ok {
		if f.Err == nil {
			f.Fail("role", "admin or member")
		}
		return "", false
	}
	r, valid := storage.ParseMemberRole(s)
	if !valid {
		f.Fail("role", "admin or member")
	}
	return r, valid
}

func (ar *adminRequest) createSCIMMapping() *apierror.Error {
	f, apiErr := ar.object()
	if apiErr != nil {
		return apiErr
	}
	group, ok := f.String("scim_group_id")
	if !ok && f.Err == nil {
		return apierror.BadRequest("scim_group_id: required string")
	}
	ws, ok := f.String("workspace_id")
	if !ok && f.Err == nil {
		return apierror.BadRequest("workspace_id: required string")
	}
	role, _ := roleOf(f)
	if f.Err != nil {
		return f.Err
	}
	m, added, err := ar.scim().CreateGroupMapping(ar.id.AccountID, group, ws, role)
	if err != nil {
		return scimStoreError(err, "SCIM group")
	}
	apierror.WriteJSON(ar.w, http.StatusCreated, map[string]any{"data": newSCIMMappingView(m), "added_memberships": added})
	return nil
}

func (ar *adminRequest) getSCIMMapping(id string) *apierror.Error {
	m, ok := ar.scim().GroupMapping(ar.id.AccountID, id)
	if !ok {
		return apierror.NotFound("SCIM group mapping not found")
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": newSCIMMappingView(m)})
	return nil
}

func (ar *adminRequest) updateSCIMMapping(id string) *apierror.Error {
	if _, ok := ar.scim().GroupMapping(ar.id.AccountID, id); !ok {
		return apierror.NotFound("SCIM group mapping not found")
	}
	f, apiErr := ar.object()
	if apiErr != nil {
		return apiErr
	}
	role, _ := roleOf(f)
	if f.Err != nil {
		return f.Err
	}
	m, err := ar.scim().UpdateGroupMapping(ar.id.AccountID, id, role)
	if err != nil {
		return scimStoreError(err, "SCIM group mapping")
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": newSCIMMappingView(m)})
	return nil
}

func (ar *adminRequest) deleteSCIMMapping(id string) *apierror.Error {
	var keep bool
	switch v := ar.r.URL.Query().Get("keep_members"); v {
	case "true":
		keep = true
	case "false":
	case "":
		return apierror.BadRequest("keep_members: required (true keeps the members this mapping granted as manually managed, false removes them)")
	default:
		return apierror.BadRequest("keep_members: expected true or false")
	}
	removed, err := ar.scim().DeleteGroupMapping(ar.id.AccountID, id, keep)
	if err != nil {
		return scimStoreError(err, "SCIM group mapping")
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"deleted": true, "removed_memberships": removed})
	return nil
}

func (ar *adminRequest) listSCIMGroups() *apierror.Error {
	offset, limit, apiErr := ar.page()
	if apiErr != nil {
		return apiErr
	}
	writePage(ar.w, ar.scim().Groups(ar.id.AccountID), offset, limit, newSCIMGroupView)
	return nil
}

// createSCIMSyncJob queues a job, answers 202 with it, and runs it in the
// background; GET /scim/sync-jobs/{id} reports its outcome.
func (ar *adminRequest) createSCIMSyncJob() *apierror.Error {
	store := ar.scim()
	j, err := store.CreateSyncJob(ar.id.AccountID)
	if err != nil {
		return storeError(err, "Organization")
	}
	accountID := ar.id.AccountID
	logger := ar.logger
	go func() {
		// The job's own record reports its outcome to the client; a
		// failure to save that record is the operator's to see.
		if _, err := store.RunSyncJob(accountID, j.ID); err != nil {
			logger.Error("SCIM sync job failed", zap.String("account", accountID), zap.String("job", j.ID), zap.Error(err))
		}
	}()
	ar.w.Header().Set("Location", APIPrefix+"/scim/sync-jobs/"+j.ID)
	apierror.WriteJSON(ar.w, http.StatusAccepted, map[string]any{"data": newSCIMSyncJobView(j)})
	return nil
}

func (ar *adminRequest) getSCIMSyncJob(id string) *apierror.Error {
	j, ok := ar.scim().SyncJob(ar.id.AccountID, id)
	if !ok {
		return apierror.NotFound("SCIM sync job not found")
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": newSCIMSyncJobView(j)})
	return nil
}
