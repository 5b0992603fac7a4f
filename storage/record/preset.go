package record

import "time"

// Preset is a named request configuration of an account: a model (or
// models), provider preferences, parameters and a system prompt that a
// request names instead of sending them, which its versions hold. Its
// slug is unique in its account and never changes.
//
//codec:fast
type Preset struct {
	ID          string  `json:"id"`
	AccountID   string  `json:"account_id"`
	WorkspaceID string  `json:"workspace_id"`
	Slug        string  `json:"slug"`
	Name        string  `json:"name"`
	Description *string `json:"description"`
	// Status is active, disabled or archived: only an active preset
	// serves requests.
	Status          string     `json:"status"`
	StatusUpdatedAt *time.Time `json:"status_updated_at"`
	CreatorUserID   *string    `json:"creator_user_id"`
	CreatedAt       time.Time  `json:"created_at"`
	// UpdatedAt is when its name, description or status last changed (a
	// new version is newer still).
	UpdatedAt time.Time `json:"updated_at"`
}

// PresetVersion is one version of a preset, a record of its own that is
// never changed: numbered from 1, the highest is the designated one.
//
//codec:fast
type PresetVersion struct {
	ID           string  `json:"id"`
	PresetID     string  `json:"preset_id"`
	AccountID    string  `json:"account_id"`
	Slug         string  `json:"slug"`
	Version      int     `json:"version"`
	CreatorID    string  `json:"creator_id"`
	SystemPrompt *string `json:"system_prompt"`
	// Config is the version's config object as JSON text (its members as
	// a request would send them).
	Config    string    `json:"config"`
	CreatedAt time.Time `json:"created_at"`
}

// RecordIDs names the preset's account and the preset.
func (p Preset) RecordIDs() (accountID, id string) { return p.AccountID, p.ID }

// The statuses of a preset.
const (
	PresetActive   = "active"
	PresetDisabled = "disabled"
	PresetArchived = "archived"
)
