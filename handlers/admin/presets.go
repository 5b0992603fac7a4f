package admin

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/presets"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// Presets are an account's named request configurations: /api/v1/presets
// and below, read with any key of the account, made with a management
// key. A preset is made, or given a new
// version, from an inference request body (POST /presets/{slug}/
// chat/completions, /messages, /responses), of which it keeps the
// members that configure a request; requests name it as their model
// ("@preset/<slug>") or in their preset member.

// presetView is a preset as the public schema has it, with its
// designated version when withVersion.
type presetView struct {
	ID                  string             `json:"id"`
	CreatorUserID       *string            `json:"creator_user_id"`
	WorkspaceID         *string            `json:"workspace_id"`
	Name                string             `json:"name"`
	Slug                string             `json:"slug"`
	Description         *string            `json:"description"`
	Status              string             `json:"status"`
	DesignatedVersionID *string            `json:"designated_version_id"`
	CreatedAt           string             `json:"created_at"`
	UpdatedAt           string             `json:"updated_at"`
	StatusUpdatedAt     *string            `json:"status_updated_at"`
	DesignatedVersion   *presetVersionView `json:"designated_version,omitempty"`
	withVersion         bool
}

// presetVersionView is a preset's version as the public schema has it.
type presetVersionView struct {
	ID           string          `json:"id"`
	PresetID     string          `json:"preset_id"`
	CreatorID    string          `json:"creator_id"`
	Version      int             `json:"version"`
	SystemPrompt *string         `json:"system_prompt"`
	Config       json.RawMessage `json:"config"`
	CreatedAt    string          `json:"created_at"`
	UpdatedAt    string          `json:"updated_at"`
}

func newPresetVersionView(v presets.Version) presetVersionView {
	created := apiTime(v.CreatedAt)
	return presetVersionView{ID: v.ID, PresetID: v.PresetID, CreatorID: v.CreatorID, Version: v.Version,
		SystemPrompt: v.SystemPrompt, Config: json.RawMessage(v.Config), CreatedAt: created, UpdatedAt: created}
}

func newPresetView(p presets.View) presetView {
	v := presetView{ID: p.ID, CreatorUserID: p.CreatorUserID, Name: p.Name, Slug: p.Slug,
		Description: p.Description, Status: p.Status, CreatedAt: apiTime(p.CreatedAt), UpdatedAt: apiTime(p.UpdatedAt),
		StatusUpdatedAt: apiTimePtr(p.StatusUpdatedAt)}
	if p.WorkspaceID != "" {
		ws := p.WorkspaceID
		v.WorkspaceID = &ws
	}
	if p.Designated != nil {
		id := p.Designated.ID
		v.DesignatedVersionID = &id
	}
	return v
}

// MarshalJSON writes designated_version, null without one, only for the
// views that carry it (a list's items do not).
func (v presetView) MarshalJSON() ([]byte, error) {
	type plain presetView
	if !v.withVersion {
		return json.Marshal(plain(v))
	}
	b, err := json.Marshal(plain(v))
	if err != nil || v.DesignatedVersion != nil {
		return b, err
	}
	return append(b[:len(b)-1], `,"designated_version":null}`...), nil
}

func newPresetWithVersion(p presets.View) presetView {
	v := newPresetView(p)
	v.withVersion = true
	if p.Designated != nil {
		d := newPresetVersionView(*p.Designated)
		v.DesignatedVersion = &d
	}
	return v
}

// presetStore is the caller's store's presets.
func (ar *adminRequest) presetStore() (*presets.Store, *apierror.Error) {
	s := presets.StoreOf(ar.store)
	if s == nil {
		return nil, errInternal()
	}
	return s, nil
}

// presetError maps the preset store's errors: a concurrent change is 409.
func presetError(err error) *apierror.Error {
	if errors.Is(err, storage.ErrConflict) {
		return apierror.New(http.StatusConflict, strings.TrimPrefix(err.Error(), storage.ErrConflict.Error()+": "))
	}
	return storeError(err, "Preset")
}

func (ar *adminRequest) listPresets() *apierror.Error {
	s, apiErr := ar.presetStore()
	if apiErr != nil {
		return apiErr
	}
	offset, limit, apiErr := ar.page()
	if apiErr != nil {
		return apiErr
	}
	wsID := ""
	if v := ar.r.URL.Query().Get("workspace_id"); v != "" {
		w, apiErr := ar.workspace(v)
		if apiErr != nil {
			return apiErr
		}
		wsID = w.ID
	}
	page, total := s.List(ar.id.AccountID, wsID, offset, limit)
	out := make([]presetView, 0, len(page))
	for _, p := range page {
		out = append(out, newPresetView(p))
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": out, "total_count": total})
	return nil
}

// ownPreset is one of the caller's account's presets; another account's
// is reported as missing.
func (ar *adminRequest) ownPreset(slug string) (*presets.Store, presets.View, *apierror.Error) {
	s, apiErr := ar.presetStore()
	if apiErr != nil {
		return nil, presets.View{}, apiErr
	}
	p, ok := s.Get(ar.id.AccountID, slug)
	if !ok {
		return nil, presets.View{}, apierror.NotFound("Preset not found")
	}
	return s, p, nil
}

func (ar *adminRequest) getPreset(slug string) *apierror.Error {
	_, p, apiErr := ar.ownPreset(slug)
	if apiErr != nil {
		return apiErr
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": newPresetWithVersion(p)})
	return nil
}

func (ar *adminRequest) listPresetVersions(slug string) *apierror.Error {
	s, _, apiErr := ar.ownPreset(slug)
	if apiErr != nil {
		return apiErr
	}
	offset, limit, apiErr := ar.page()
	if apiErr != nil {
		return apiErr
	}
	vs, total, err := s.Versions(ar.id.AccountID, slug, offset, limit)
	if err != nil {
		return presetError(err)
	}
	out := make([]presetVersionView, 0, len(vs))
	for _, v := range vs {
		out = append(out, newPresetVersionView(v))
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": out, "total_count": total})
	return nil
}

func (ar *adminRequest) getPresetVersion(slug, version string) *apierror.Error {
	s, _, apiErr := ar.ownPreset(slug)
	if apiErr != nil {
		return apiErr
	}
	n, err := strconv.Atoi(version)
	if err != nil || n < 1 {
		return apierror.BadRequest("version: expected a positive integer")
	}
	v, ok := s.Version(ar.id.AccountID, slug, n)
	if !ok {
		return apierror.NotFound("Preset version not found")
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": newPresetVersionView(v)})
	return nil
}

// putPreset makes a preset, or a new version of it, from an inference
// body of kind.
func (ar *adminRequest) putPreset(slug string, kind dialect.Kind) *apierror.Error {
	if !ar.id.Management {
		return apierror.New(http.StatusForbidden, "Only management keys can perform this operation")
	}
	s, apiErr := ar.presetStore()
	if apiErr != nil {
		return apiErr
	}
	if err := presets.CheckSlug(slug); err != nil {
		return presetError(err)
	}
	body, apiErr := reqbody.Read(ar.w, ar.r, maxAdminBody)
	if apiErr != nil {
		return apiErr
	}
	config, system, err := presets.ConfigFrom(kind, body)
	if err != nil {
		return presetError(err)
	}
	nv := presets.NewVersion{SystemPrompt: system, Config: config, CreatorID: ar.id.Hash,
		WorkspaceID: ar.r.URL.Query().Get("workspace_id")}
	switch u := ar.id.MgmtKey.CreatorUserID; {
	case u != nil:
		nv.CreatorUserID, nv.CreatorID = u, *u
	case ar.member != "":
		nv.CreatorUserID, nv.CreatorID = &ar.member, ar.member
	case nv.CreatorID == "":
		nv.CreatorID = ar.id.AccountID // the operator, or the dashboard's owner
	}
	p, _, err := s.Put(ar.id.AccountID, slug, nv)
	if err != nil {
		return presetError(err)
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": newPresetWithVersion(p)})
	return nil
}

// updatePreset changes a preset's name, description or status (active,
// disabled, archived: only an active preset serves requests), with a
// management key; its versions do not change. The public API has no
// route for this; the gateway adds it in the shape of its other PATCHes.
func (ar *adminRequest) updatePreset(slug string) *apierror.Error {
	if !ar.id.Management {
		return apierror.New(http.StatusForbidden, "Only management keys can perform this operation")
	}
	s, _, apiErr := ar.ownPreset(slug)
	if apiErr != nil {
		return apiErr
	}
	f, apiErr := ar.object()
	if apiErr != nil {
		return apiErr
	}
	var d presets.Details
	if v, ok := f.String("name"); ok {
		d.Name = &v
	}
	if v, ok := f.NullableString("description"); ok {
		d.Description = &v
	}
	if v, ok := f.String("status"); ok {
		d.Status = &v
	}
	if f.Err != nil {
		return f.Err
	}
	p, err := s.Update(ar.id.AccountID, slug, d)
	if err != nil {
		return presetError(err)
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": newPresetWithVersion(p)})
	return nil
}

func (ar *adminRequest) putPresetChat(slug string) *apierror.Error {
	return ar.putPreset(slug, dialect.Chat)
}

func (ar *adminRequest) putPresetMessages(slug string) *apierror.Error {
	return ar.putPreset(slug, dialect.Messages)
}

func (ar *adminRequest) putPresetResponses(slug string) *apierror.Error {
	return ar.putPreset(slug, dialect.Responses)
}
