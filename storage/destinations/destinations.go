// Package destinations keeps the accounts' observability destinations:
// where their generation records are exported (package export), each
// destination's settings sealed with its record.
package destinations

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
	"github.com/tollgate-dev/caddy-tollgate/storage/seal"
)

// DestinationStore keeps the accounts' observability destinations.
type DestinationStore struct {
	k            *kernel.Kernel
	destinations kernel.Records[Destination] // by account id, then id
	// acct is the accounts, workspaces and keys a destination names (the
	// store's account store).
	acct Accounts
	now  func() time.Time
}

// Accounts is what the destinations ask of the accounts, under the
// kernel's lock, which the caller holds.
type Accounts interface {
	// AccountWorkspace resolves a new record's workspace ("": the
	// account's default).
	AccountWorkspace(accountID, workspaceID string) (string, error)
	// CheckKeyHashes refuses a hash that is not a key of the account.
	CheckKeyHashes(accountID string, hashes []string) error
}

// New is the destinations of the accounts acct, over k, on the clock now.
func New(k *kernel.Kernel, acct Accounts, now func() time.Time) *DestinationStore {
	return &DestinationStore{k: k, destinations: kernel.Records[Destination]{}, acct: acct, now: now}
}

// Prefix keys observability destinations: o/<account id>/<destination
// id>.
const Prefix = "o/"

func (s *DestinationStore) Kinds() []kernel.Kind {
	return []kernel.Kind{kernel.Removable(s.destinations.Kind(Prefix, func(d *Destination) { s.k.ObserveSeq(d.Seq) }), s.destinations)}
}

// Destination is an observability destination: where an account's
// generation records are exported (see the export package). Config is the
// public form of the destination's settings, secrets masked; Sealed holds
// the whole settings object, sealed with the record id as additional data,
// and is opened only by the exporter.
type Destination struct {
	ID          string  `json:"id"`
	AccountID   string  `json:"account_id"`
	WorkspaceID string  `json:"workspace_id"`
	Type        string  `json:"type"`
	Name        *string `json:"name"`
	Enabled     bool    `json:"enabled"`
	// APIKeyHashes restricts the export to these keys' requests; nil: all.
	APIKeyHashes            []string `json:"api_key_hashes"`
	BroadcastCost           bool     `json:"broadcast_generation_cost"`
	BroadcastIdentity       bool     `json:"broadcast_generation_identity"`
	BroadcastRequestContext bool     `json:"broadcast_generation_request_context"`
	PrivacyMode             bool     `json:"privacy_mode"`
	// FilterRules is the public filter_rules object; nil is null.
	FilterRules  json.RawMessage `json:"filter_rules"`
	SamplingRate float64         `json:"sampling_rate"`
	Regions      []string        `json:"regions"`
	// Config is the public (masked) configuration object.
	Config    json.RawMessage `json:"config"`
	Sealed    []byte          `json:"sealed"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
	// Seq orders destinations by creation; Version counts updates, so that
	// a consumer can cache what it derives from one version.
	Seq     uint64 `json:"seq"`
	Version uint64 `json:"version"`
}

// MaxDestinationsPerType bounds an account's destinations of one type.
const MaxDestinationsPerType = 5

func (d Destination) clone() Destination {
	d.APIKeyHashes = slices.Clone(d.APIKeyHashes)
	d.Regions = slices.Clone(d.Regions)
	d.FilterRules = slices.Clone(d.FilterRules)
	d.Config = slices.Clone(d.Config)
	d.Sealed = slices.Clone(d.Sealed)
	if d.Name != nil {
		n := *d.Name
		d.Name = &n
	}
	return d
}

// OpenConfig returns the destination's full settings object (secrets
// included).
func (d Destination) OpenConfig(sealer *seal.Sealer) ([]byte, error) {
	if sealer == nil {
		return nil, seal.ErrUnseal
	}
	return sealer.Open(d.Sealed, []byte(d.ID))
}

// SealConfig seals the full settings object into the destination, whose ID
// must be set.
func (d *Destination) SealConfig(sealer *seal.Sealer, full []byte) {
	d.Sealed = sealer.Seal(full, []byte(d.ID))
}

func (d Destination) RecordIDs() (accountID, id string) { return d.AccountID, d.ID }

// CreateDestination stores a new destination. d.ID is assigned when empty
// (the caller may set it first to seal the config); the workspace defaults
// to the account's default workspace. At most MaxDestinationsPerType per
// type and account: ErrConflict past it.
func (s *DestinationStore) CreateDestination(d Destination) (Destination, error) {
	if d.ID == "" {
		d.ID = record.NewUUID()
	}
	t := s.now().UTC()
	d.CreatedAt, d.UpdatedAt, d.Version = t, t, 1
	err := kernel.Create(s.k, s.destinations, Prefix, func() (*Destination, error) {
		ws, err := s.acct.AccountWorkspace(d.AccountID, d.WorkspaceID)
		if err != nil {
			return nil, err
		}
		d.WorkspaceID = ws
		if err := s.acct.CheckKeyHashes(d.AccountID, d.APIKeyHashes); err != nil {
			return nil, destinationKeyHashesError(err)
		}
		n := 0
		for _, o := range s.destinations[d.AccountID] {
			if o.Type == d.Type {
				n++
			}
		}
		if n >= MaxDestinationsPerType {
			return nil, fmt.Errorf("%w: at most %d destinations of type %q are allowed", kernel.ErrConflict, MaxDestinationsPerType, d.Type)
		}
		d.Seq = s.k.NextSeq()
		c := d.clone()
		return &c, nil
	})
	if err != nil {
		return Destination{}, err
	}
	return d, nil
}

// destinationKeyHashesError names api_key_hashes in CheckKeyHashes' error.
func destinationKeyHashesError(err error) error {
	return fmt.Errorf("%w: api_key_hashes%s", record.ErrInvalid, strings.TrimPrefix(err.Error(), record.ErrInvalid.Error()+": allowed_api_key_hashes"))
}

// Destination returns one of an account's destinations.
func (s *DestinationStore) Destination(accountID, id string) (Destination, bool) {
	d, ok := kernel.Lookup(s.k, s.destinations, accountID, id)
	if !ok {
		return Destination{}, false
	}
	return d.clone(), true
}

// ListDestinations returns one page of an account's destinations in a
// workspace, most recent first, and how many there are in all.
func (s *DestinationStore) ListDestinations(accountID, workspaceID string, offset, limit int) ([]Destination, int) {
	all := kernel.Collect(s.k, s.destinations, accountID, func(d *Destination) bool {
		return workspaceID == "" || d.WorkspaceID == workspaceID
	})
	for i := range all {
		all[i] = all[i].clone()
	}
	return kernel.NewestFirstPage(all, func(d *Destination) uint64 { return d.Seq }, offset, limit)
}

// DestinationsFor returns the account's enabled destinations. Memory only:
// the exporter calls it for every generation.
func (s *DestinationStore) DestinationsFor(accountID string) []Destination {
	s.k.RLock()
	defer s.k.RUnlock()
	m := s.destinations[accountID]
	if len(m) == 0 {
		return nil
	}
	out := make([]Destination, 0, len(m))
	for _, d := range m {
		if d.Enabled {
			out = append(out, *d) // shared slices: read-only for callers
		}
	}
	return out
}

// UpdateDestination applies fn to a copy of the destination and persists
// the result; identity, account, workspace, type and creation cannot
// change.
func (s *DestinationStore) UpdateDestination(accountID, id string, fn func(*Destination) error) (Destination, error) {
	d, err := kernel.Update(s.k, s.destinations, Prefix, accountID, id, func(cur *Destination) (*Destination, error) {
		d := cur.clone()
		if err := fn(&d); err != nil {
			return nil, err
		}
		d.ID, d.AccountID, d.WorkspaceID, d.Type = cur.ID, cur.AccountID, cur.WorkspaceID, cur.Type
		d.CreatedAt, d.Seq, d.Version = cur.CreatedAt, cur.Seq, cur.Version+1
		if !slices.Equal(d.APIKeyHashes, cur.APIKeyHashes) {
			if err := s.acct.CheckKeyHashes(accountID, d.APIKeyHashes); err != nil {
				return nil, destinationKeyHashesError(err)
			}
		}
		d.UpdatedAt = s.now().UTC()
		return &d, nil
	})
	return d.clone(), err
}

// DeleteDestination removes a destination; its export stops at once.
func (s *DestinationStore) DeleteDestination(accountID, id string) error {
	return kernel.Delete(s.k, s.destinations, Prefix, accountID, id)
}
