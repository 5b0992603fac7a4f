// Package endpoints keeps the accounts' private endpoints: their own model
// deployments, used as providers for the accounts' requests, through a
// draft, validated, enabled and disabled lifecycle.
package endpoints

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
	"github.com/tollgate-dev/caddy-tollgate/storage/seal"
)

// EndpointStore keeps the accounts' private endpoints.
type EndpointStore struct {
	k         *kernel.Kernel
	endpoints kernel.Records[PrivateEndpoint] // by account id, then id
	// acct is the accounts and workspaces endpoints belong to (the
	// store's account store).
	acct Accounts
	now  func() time.Time
}

// Accounts is what the private endpoints ask of the accounts, under the
// kernel's lock, which the caller holds.
type Accounts interface {
	// AccountWorkspace resolves a new record's workspace ("": the
	// account's default).
	AccountWorkspace(accountID, workspaceID string) (string, error)
}

// New is the private endpoints of the accounts acct, over k, on the clock
// now.
func New(k *kernel.Kernel, acct Accounts, now func() time.Time) *EndpointStore {
	return &EndpointStore{k: k, endpoints: kernel.Records[PrivateEndpoint]{}, acct: acct, now: now}
}

// Prefix keys private endpoints: pe/<account id>/<endpoint id>.
const Prefix = "pe/"

func (s *EndpointStore) Kinds() []kernel.Kind {
	return []kernel.Kind{kernel.Removable(s.endpoints.Kind(Prefix, func(e *PrivateEndpoint) { s.k.ObserveSeq(e.Seq) }), s.endpoints)}
}

// EndpointStatus is a private endpoint's state.
type EndpointStatus string

// The private endpoint lifecycle: a draft is edited and validated (a real
// probe of the endpoint); a validated endpoint is activated (enabled) and
// then routes the account's requests for its model until disabled.
const (
	EndpointDraft     EndpointStatus = "draft"
	EndpointValidated EndpointStatus = "validated"
	EndpointEnabled   EndpointStatus = "enabled"
	EndpointDisabled  EndpointStatus = "disabled"
)

// EndpointPricing is what a private endpoint charges, as exact decimal
// strings of credits (per token, per token, per request).
type EndpointPricing struct {
	Prompt     string `json:"prompt"`
	Completion string `json:"completion"`
	Request    string `json:"request"`
}

// EndpointValidation is the outcome of the last probe.
type EndpointValidation struct {
	Succeeded bool      `json:"succeeded"`
	Error     string    `json:"error,omitempty"`
	At        time.Time `json:"at"`
}

// PrivateEndpoint is an account's own model deployment, used as a provider
// for the account's requests for Model.
type PrivateEndpoint struct {
	ID          string `json:"id"`
	AccountID   string `json:"account_id"`
	WorkspaceID string `json:"workspace_id"`
	Name        string `json:"name"`
	// Model is the public model id that the endpoint serves.
	Model string `json:"model"`
	// BaseURL is the endpoint's OpenAI-compatible API root.
	BaseURL string `json:"base_url"`
	// UpstreamModel is the endpoint's own id for the model.
	UpstreamModel string              `json:"upstream_model"`
	Status        EndpointStatus      `json:"status"`
	Pricing       EndpointPricing     `json:"pricing"`
	Validation    *EndpointValidation `json:"validation"`
	// Label is a masked snippet of the endpoint's API key ("" when none);
	// Sealed is the key, sealed with the record id as additional data.
	Label     string    `json:"label"`
	Sealed    []byte    `json:"sealed"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	Seq       uint64    `json:"seq"`
}

func (e PrivateEndpoint) clone() PrivateEndpoint {
	e.Sealed = slices.Clone(e.Sealed)
	if e.Validation != nil {
		v := *e.Validation
		e.Validation = &v
	}
	return e
}

// SetSecret seals the endpoint's API key; "" removes it. The ID must be
// set.
func (e *PrivateEndpoint) SetSecret(sealer *seal.Sealer, secret string) {
	if secret == "" {
		e.Sealed, e.Label = nil, ""
		return
	}
	e.Sealed = sealer.Seal([]byte(secret), []byte(e.ID))
	e.Label = seal.Mask(secret)
}

// OpenSecret returns the endpoint's API key ("" when it has none).
func (e PrivateEndpoint) OpenSecret(sealer *seal.Sealer) (string, error) {
	if len(e.Sealed) == 0 {
		return "", nil
	}
	if sealer == nil {
		return "", seal.ErrUnseal
	}
	b, err := sealer.Open(e.Sealed, []byte(e.ID))
	return string(b), err
}

func (e PrivateEndpoint) RecordIDs() (accountID, id string) { return e.AccountID, e.ID }

// NewEndpointID returns a fresh private endpoint id, for callers that seal
// a secret before CreatePrivateEndpoint.
func NewEndpointID() string { return record.NewUUID() }

// CreatePrivateEndpoint stores a new endpoint as a draft; e.ID is assigned
// when empty.
func (s *EndpointStore) CreatePrivateEndpoint(e PrivateEndpoint) (PrivateEndpoint, error) {
	if e.ID == "" {
		e.ID = record.NewUUID()
	}
	t := s.now().UTC()
	e.CreatedAt, e.UpdatedAt, e.Status, e.Validation = t, t, EndpointDraft, nil
	err := kernel.Create(s.k, s.endpoints, Prefix, func() (*PrivateEndpoint, error) {
		ws, err := s.acct.AccountWorkspace(e.AccountID, e.WorkspaceID)
		if err != nil {
			return nil, err
		}
		e.WorkspaceID = ws
		e.Seq = s.k.NextSeq()
		c := e.clone()
		return &c, nil
	})
	if err != nil {
		return PrivateEndpoint{}, err
	}
	return e, nil
}

// PrivateEndpoint returns one of an account's endpoints.
func (s *EndpointStore) PrivateEndpoint(accountID, id string) (PrivateEndpoint, bool) {
	e, ok := kernel.Lookup(s.k, s.endpoints, accountID, id)
	if !ok {
		return PrivateEndpoint{}, false
	}
	return e.clone(), true
}

// ListPrivateEndpoints returns one page of an account's endpoints, most
// recent first, and how many there are in all.
func (s *EndpointStore) ListPrivateEndpoints(accountID string, offset, limit int) ([]PrivateEndpoint, int) {
	all := kernel.Collect(s.k, s.endpoints, accountID, nil)
	for i := range all {
		all[i] = all[i].clone()
	}
	return kernel.NewestFirstPage(all, func(e *PrivateEndpoint) uint64 { return e.Seq }, offset, limit)
}

// EnabledEndpointsFor returns the account's enabled endpoints for a public
// model id, oldest first. Memory only, for the request path.
func (s *EndpointStore) EnabledEndpointsFor(accountID, model string) []PrivateEndpoint {
	s.k.RLock()
	var out []PrivateEndpoint
	for _, e := range s.endpoints[accountID] {
		if e.Status == EndpointEnabled && e.Model == model {
			out = append(out, *e) // Sealed shared: read-only for callers
		}
	}
	s.k.RUnlock()
	if len(out) > 1 {
		sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	}
	return out
}

// StateError is a refused lifecycle transition: the endpoint is in Status.
type StateError struct {
	Action string
	Status EndpointStatus
	Want   []EndpointStatus
}

func (e *StateError) Error() string {
	want := make([]string, len(e.Want))
	for i, w := range e.Want {
		want[i] = string(w)
	}
	return fmt.Sprintf("cannot %s a private endpoint in state %q; only a %s endpoint can be", e.Action, e.Status, strings.Join(want, " or "))
}

// UpdatePrivateEndpoint applies fn to a copy of the endpoint when its
// status is one of from (any status when from is empty), and persists the
// result; a wrong status gives a *StateError naming the current one.
// Identity, ownership and creation cannot change.
func (s *EndpointStore) UpdatePrivateEndpoint(accountID, id, action string, from []EndpointStatus, fn func(*PrivateEndpoint) error) (PrivateEndpoint, error) {
	e, err := kernel.Update(s.k, s.endpoints, Prefix, accountID, id, func(cur *PrivateEndpoint) (*PrivateEndpoint, error) {
		if len(from) > 0 && !slices.Contains(from, cur.Status) {
			return nil, &StateError{Action: action, Status: cur.Status, Want: from}
		}
		e := cur.clone()
		if err := fn(&e); err != nil {
			return nil, err
		}
		e.ID, e.AccountID, e.WorkspaceID, e.CreatedAt, e.Seq = cur.ID, cur.AccountID, cur.WorkspaceID, cur.CreatedAt, cur.Seq
		e.UpdatedAt = s.now().UTC()
		return &e, nil
	})
	return e.clone(), err
}

// DeletePrivateEndpoint removes an endpoint; it stops routing at once.
func (s *EndpointStore) DeletePrivateEndpoint(accountID, id string) error {
	return kernel.Delete(s.k, s.endpoints, Prefix, accountID, id)
}
