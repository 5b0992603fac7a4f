// Package presets keeps the accounts' presets: named request
// configurations (a model or models, provider preferences, parameters, a
// system prompt) that a request names instead of sending them. Each
// change is a new immutable version; the latest is the one requests get.
//
// The store is a domain store of package storage kept here: it registers
// itself with storage.RegisterDomain, keeps its records in memory under
// the kernel's one lock and writes them through the kernel, so that
// replicas on one Redis see each other's presets through the change feed.
package presets

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/storage/codec"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// The store's errors are storage's, so that callers map them as any
// store error.
var (
	ErrNotFound = storage.ErrNotFound
	ErrInvalid  = storage.ErrInvalid
	ErrConflict = storage.ErrConflict
)

// Preset is a stored preset.
type Preset = record.Preset

// Version is one version of a preset.
type Version = record.PresetVersion

// now is the store's clock.
var now = time.Now

const domainName = "presets"

// Prefix keys presets: ps/<account id>/<slug>.
const Prefix = "ps/"

// claimTTL is how long the claim of a version number lasts on a shared
// backend: far longer than the feed takes to bring the version to every
// replica.
const claimTTL = 10 * time.Minute

func init() {
	storage.RegisterDomain(storage.DomainInfo{
		Name: domainName,
		New:  func(st *storage.Store) storage.Domain { return newStore(st) },
	})
}

// StoreOf returns the preset store of st.
func StoreOf(st *storage.Store) *Store {
	s, _ := st.Domain(domainName).(*Store)
	return s
}

// Store keeps the presets. Every method is safe for concurrent use; a
// change returns once it is durable.
type Store struct {
	k   *kernel.Kernel
	org storage.Locked
	// presets by account id, then slug (a preset's record id: slugs are
	// unique per account and never change); their versions by account id,
	// then slug, in order. Guarded by the kernel's lock.
	presets  kernel.Records[slugged]
	versions map[string]map[string][]*Version
}

// slugged is a preset as the kernel keys it: by its slug.
type slugged record.Preset

func (p slugged) RecordIDs() (accountID, id string) { return p.AccountID, p.Slug }

func newStore(st *storage.Store) *Store {
	return &Store{k: st.Kernel(), org: st.Locked(), presets: kernel.Records[slugged]{},
		versions: map[string]map[string][]*Version{}}
}

// VersionPrefix keys presets' versions: pv/<account id>/<slug>/<version>.
const VersionPrefix = "pv/"

func versionKey(accountID, slug string, n int) string {
	return kernel.RecordKey(VersionPrefix, accountID, slug+"/"+strconv.Itoa(n))
}

// Kinds registers the presets' record kinds: the presets, then their
// versions.
func (s *Store) Kinds() []kernel.Kind {
	kind := s.presets.Kind(Prefix, nil)
	kind.Load = func(_, v []byte) error {
		p := new(record.Preset)
		if err := codec.Decode(v, p, record.FastPreset); err != nil {
			return err
		}
		s.presets.Put((*slugged)(p))
		return nil
	}
	versions := kernel.Kind{
		Prefix: VersionPrefix,
		Load: func(_, b []byte) error {
			v := new(Version)
			if err := codec.Decode(b, v, record.FastPresetVersion); err != nil {
				return err
			}
			s.putVersion(v)
			return nil
		},
		Reset:    func() { clear(s.versions) },
		Snapshot: s.versionSnapshot,
		// versions are never deleted; Remove lets another replica's new
		// one be applied alone.
		Remove: func(string) {},
	}
	return []kernel.Kind{kernel.Removable(kind, s.presets), versions}
}

// putVersion files a version in order (a version read again replaces
// itself). Callers hold the kernel's lock.
func (s *Store) putVersion(v *Version) {
	m := s.versions[v.AccountID]
	if m == nil {
		m = map[string][]*Version{}
		s.versions[v.AccountID] = m
	}
	vs := m[v.Slug]
	i := sort.Search(len(vs), func(i int) bool { return vs[i].Version >= v.Version })
	if i < len(vs) && vs[i].Version == v.Version {
		vs = slices.Clone(vs)
		vs[i] = v
	} else {
		vs = slices.Insert(slices.Clip(vs), i, v)
	}
	m[v.Slug] = vs
}

func (s *Store) versionSnapshot(key string) any {
	accountID, rest, _ := strings.Cut(key[len(VersionPrefix):], "/")
	slug, n, _ := strings.Cut(rest, "/")
	for _, v := range s.versions[accountID][slug] {
		if strconv.Itoa(v.Version) == n {
			return *v
		}
	}
	return nil
}

var slugPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// MaxSlugLength bounds a preset's slug.
const MaxSlugLength = 64

// CheckSlug refuses a slug that is not URL-safe: lower-case letters,
// digits, '-' and '_', starting with a letter or digit.
func CheckSlug(slug string) error {
	switch {
	case slug == "":
		return fmt.Errorf("%w: slug: required", ErrInvalid)
	case len(slug) > MaxSlugLength:
		return fmt.Errorf("%w: slug: at most %d characters", ErrInvalid, MaxSlugLength)
	case !slugPattern.MatchString(slug):
		return fmt.Errorf("%w: slug: %q must be lower-case letters, digits, '-' and '_', starting with a letter or digit", ErrInvalid, slug)
	}
	return nil
}

// View is a preset with its designated version (nil: none yet) and how
// many versions it has; UpdatedAt is the latest of its own change and its
// designated version's creation.
type View struct {
	Preset
	Designated *Version
	Versions   int
}

// view is a preset's view. Callers hold the kernel's lock.
func (s *Store) view(p *slugged) View {
	v := View{Preset: Preset(*p)}
	vs := s.versions[p.AccountID][p.Slug]
	if len(vs) > 0 {
		d := *vs[len(vs)-1]
		v.Designated, v.Versions = &d, len(vs)
		if d.CreatedAt.After(v.UpdatedAt) {
			v.UpdatedAt = d.CreatedAt
		}
	}
	return v
}

// Get returns an account's preset by slug.
func (s *Store) Get(accountID, slug string) (View, bool) {
	s.k.RLock()
	defer s.k.RUnlock()
	p, ok := s.presets[accountID][slug]
	if !ok {
		return View{}, false
	}
	return s.view(p), true
}

// Designated returns the designated version of an account's preset and
// the preset's id and status, read from memory.
func (s *Store) Designated(accountID, slug string) (v *Version, presetID, status string, ok bool) {
	s.k.RLock()
	defer s.k.RUnlock()
	p, ok := s.presets[accountID][slug]
	if !ok {
		return nil, "", "", false
	}
	vs := s.versions[accountID][slug]
	if len(vs) == 0 {
		return nil, p.ID, p.Status, true
	}
	return vs[len(vs)-1], p.ID, p.Status, true // published versions never change
}

// List returns one page of an account's presets (of one workspace, or
// every one for ""), most recently updated first, and how many there are.
func (s *Store) List(accountID, workspaceID string, offset, limit int) ([]View, int) {
	s.k.RLock()
	all := make([]View, 0, len(s.presets[accountID]))
	for _, p := range s.presets[accountID] {
		if workspaceID == "" || p.WorkspaceID == workspaceID {
			all = append(all, s.view(p))
		}
	}
	s.k.RUnlock()
	sort.Slice(all, func(i, j int) bool {
		if !all[i].UpdatedAt.Equal(all[j].UpdatedAt) {
			return all[i].UpdatedAt.After(all[j].UpdatedAt)
		}
		return all[i].Slug < all[j].Slug
	})
	total := len(all)
	if offset >= total {
		return []View{}, total
	}
	all = all[offset:]
	if limit > 0 && len(all) > limit {
		all = all[:limit]
	}
	return all, total
}

// Versions returns one page of a preset's versions, oldest first, and how
// many there are; ErrNotFound when the account has no such preset.
func (s *Store) Versions(accountID, slug string, offset, limit int) ([]Version, int, error) {
	s.k.RLock()
	defer s.k.RUnlock()
	if _, ok := s.presets[accountID][slug]; !ok {
		return nil, 0, ErrNotFound
	}
	vs := s.versions[accountID][slug]
	out := []Version{}
	for i := offset; i < len(vs) && (limit <= 0 || len(out) < limit); i++ {
		out = append(out, *vs[i])
	}
	return out, len(vs), nil
}

// Version returns version n of an account's preset.
func (s *Store) Version(accountID, slug string, n int) (Version, bool) {
	s.k.RLock()
	defer s.k.RUnlock()
	if _, ok := s.presets[accountID][slug]; !ok {
		return Version{}, false
	}
	vs := s.versions[accountID][slug]
	if n < 1 || n > len(vs) || vs[n-1].Version != n {
		return Version{}, false
	}
	return *vs[n-1], true
}

// NewVersion is what a new version of a preset holds, and who makes it.
type NewVersion struct {
	// WorkspaceID places a new preset ("": the account's default
	// workspace; an id or a slug); an existing preset keeps its own.
	WorkspaceID string
	// CreatorUserID is the member who made it, when known; CreatorID names
	// the maker in the version (the member, else the management key).
	CreatorUserID *string
	CreatorID     string
	SystemPrompt  *string
	// Config is the version's config object, as JSON text.
	Config string
}

// Put makes a new version of the account's preset slug, creating the
// preset (named after its slug) when there is none; created reports that.
// A version made meanwhile by another writer, on this replica or another,
// is ErrConflict: nothing written. On a shared backend the version's
// number is claimed first, so that two replicas never both write one.
func (s *Store) Put(accountID, slug string, nv NewVersion) (v View, created bool, err error) {
	if err := CheckSlug(slug); err != nil {
		return View{}, false, err
	}
	s.k.RLock()
	n := len(s.versions[accountID][slug]) + 1
	s.k.RUnlock()
	if claimer, shared := s.k.Claimer(); shared {
		won, err := claimer.Claim("~pv/"+accountID+"/"+slug+"/"+strconv.Itoa(n), claimTTL)
		if err != nil {
			return View{}, false, err
		}
		if !won {
			return View{}, false, conflict(slug)
		}
	}
	t := now().UTC()
	s.k.Lock()
	a, ok := s.org.Account(accountID)
	if !ok {
		s.k.Unlock()
		return View{}, false, ErrNotFound
	}
	if len(s.versions[accountID][slug])+1 != n {
		s.k.Unlock()
		return View{}, false, conflict(slug)
	}
	p, ok := s.presets[accountID][slug]
	if !ok {
		ws := a.DefaultWorkspaceID
		if nv.WorkspaceID != "" {
			w, found := s.org.ResolveWorkspace(accountID, nv.WorkspaceID)
			if !found {
				s.k.Unlock()
				return View{}, false, fmt.Errorf("%w: workspace_id: workspace %s not found", ErrInvalid, nv.WorkspaceID)
			}
			ws = w.ID
		}
		p = &slugged{ID: record.NewUUID(), AccountID: accountID, WorkspaceID: ws, Slug: slug, Name: slug,
			Status: record.PresetActive, CreatorUserID: nv.CreatorUserID, CreatedAt: t, UpdatedAt: t}
		kernel.PutDirty(s.k, s.presets, Prefix, p)
		created = true
	}
	s.putVersion(&Version{ID: record.NewUUID(), PresetID: p.ID, AccountID: accountID, Slug: slug, Version: n,
		CreatorID: nv.CreatorID, SystemPrompt: nv.SystemPrompt, Config: nv.Config, CreatedAt: t})
	b := s.k.MarkDirty(versionKey(accountID, slug, n))
	v = s.view(p)
	s.k.Unlock()
	return v, created, b.Wait()
}

func conflict(slug string) error {
	return fmt.Errorf("%w: preset %q was changed meanwhile; try again", ErrConflict, slug)
}

// Details are a preset's fields other than its versions.
type Details struct {
	Name        *string
	Description **string
	Status      *string
}

// Update changes a preset's name, description or status (a nil field is
// left as it is); its versions do not change.
func (s *Store) Update(accountID, slug string, d Details) (View, error) {
	if d.Name != nil && strings.TrimSpace(*d.Name) == "" {
		return View{}, fmt.Errorf("%w: name: required non-empty string", ErrInvalid)
	}
	if d.Status != nil {
		switch *d.Status {
		case record.PresetActive, record.PresetDisabled, record.PresetArchived:
		default:
			return View{}, fmt.Errorf("%w: status: %q is not one of active, disabled, archived", ErrInvalid, *d.Status)
		}
	}
	var v View
	_, err := kernel.Update(s.k, s.presets, Prefix, accountID, slug, func(cur *slugged) (*slugged, error) {
		next := *cur
		t := now().UTC()
		if d.Name != nil {
			next.Name = strings.TrimSpace(*d.Name)
		}
		if d.Description != nil {
			next.Description = *d.Description
		}
		if d.Status != nil && *d.Status != cur.Status {
			next.Status, next.StatusUpdatedAt = *d.Status, &t
		}
		next.UpdatedAt = t
		v = s.view(&next)
		return &next, nil
	})
	return v, err
}
