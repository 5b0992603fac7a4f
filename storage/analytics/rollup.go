package analytics

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// Store answers usage queries from a rollup of the generation and
// feedback records, built at the store's Open (Build) and kept current
// from settled requests.
type Store struct {
	k         *kernel.Kernel
	analytics *rollup
	seal      *sealer // seals finished hours (SealRollup)
	// sealedBefore is the sealed hours' watermark stored (SealRollup),
	// sealNext the one the next SealRollup stores; under the kernel's lock.
	sealedBefore, sealNext int32
	// generationsRead counts the generation records the last Build read.
	generationsRead int
	Sources
}

// Sources are what the analytics read of the other stores.
type Sources struct {
	// Keys are the keys its rows name, Generations the settled
	// generations it counts, EndUsers the end users it records on first
	// sight, Feedback the feedback it counts at Build.
	Keys        Keys
	Generations Generations
	EndUsers    EndUsers
	Feedback    FeedbackLoader
	// Now is the store's clock (time.Now when nil).
	Now func() time.Time
}

// Keys is what the analytics ask of the accounts' keys, under the
// kernel's lock, which the caller holds.
type Keys interface {
	// EachKeyCreator calls fn with each of an account's keys that a
	// member created, and that member.
	EachKeyCreator(accountID string, fn func(hash, creator string))
}

// EndUsers is what the analytics ask of the end users, under the
// kernel's lock (or in Build).
type EndUsers interface {
	// HasEndUser reports whether the end user is known.
	HasEndUser(accountID, user string) bool
	// EnsureEndUser records an end user on first use.
	EnsureEndUser(accountID, user string, t time.Time)
}

// Generations tells the analytics of each settled generation.
type Generations interface {
	SubscribeGenerations(fn func(record.Generation)) (cancel func())
}

// FeedbackLoader counts the stored feedback into the analytics
// (CountFeedback) at Build.
type FeedbackLoader interface {
	LoadFeedback() error
}

// New returns the analytics over k; Use gives them their sources before
// Build.
func New(k *kernel.Kernel) *Store { return &Store{k: k} }

// Use sets the sources the analytics read.
func (s *Store) Use(src Sources) { s.Sources = src }

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// GenerationsRead is how many generation records the last Build read.
func (s *Store) GenerationsRead() int { return s.generationsRead }

// Sealed reports whether the account's hour of t is sealed.
func (s *Store) Sealed(accountID string, t time.Time) bool {
	return s.analytics.isSealed(accountID, hourOf(t))
}

// The analytics rollup keeps, per account, one cell of sums per UTC hour and
// combination of dimensions (API key, model, provider, end user, workspace,
// status, BYOK). It is built at Open from the stored generation and
// feedback records and then kept current by the store's own subscription to
// settled generations, so it belongs to the store (shared across config
// reloads) and counts every durable record exactly once. Queries scan an
// account's cells, never the generation records.

// Dimensions of a rollup cell, as query and activity code names them.
const (
	DimAPIKey    = "api_key_id"
	DimModel     = "model"
	DimProvider  = "provider"
	DimEndUser   = "end_user"
	DimWorkspace = "workspace"
	DimStatus    = "status"
	DimBYOK      = "byok"
	// DimUser is the org member who created the request's API key
	// (resolved at query time, not stored in cells).
	DimUser = "user"
)

// Dims lists the rollup dimensions in a fixed order.
var Dims = []string{DimModel, DimProvider, DimAPIKey, DimEndUser, DimWorkspace, DimStatus, DimBYOK}

// Sums are the additive figures of a set of generations. Cost is split
// between credits spent (Usage) and BYOK usage, as the key counters are.
type Sums struct {
	Requests         int64
	PromptTokens     int64
	CompletionTokens int64
	Usage            money.Amount
	BYOKUsage        money.Amount
	LatencyMS        int64 // sum over requests
	Feedback         int64 // feedback records on these generations
	// Flagged counts the generations a flagging content filter matched
	// (record.Generation.ContentFlags not empty).
	Flagged int64
}

// Add adds o to s.
func (s *Sums) Add(o Sums) {
	s.Requests += o.Requests
	s.PromptTokens += o.PromptTokens
	s.CompletionTokens += o.CompletionTokens
	s.Usage += o.Usage
	s.BYOKUsage += o.BYOKUsage
	s.LatencyMS += o.LatencyMS
	s.Feedback += o.Feedback
	s.Flagged += o.Flagged
}

// cellKey identifies a rollup cell; strings are interned per account.
type cellKey struct {
	hour                                      int32 // hours since the Unix epoch, UTC
	key, model, provider, user, workspace, st uint32
	byok                                      bool
}

type cell struct {
	k cellKey
	s Sums
}

// acctRollup is one account's cells. Cells are appended in arrival order;
// index finds a cell by key.
type acctRollup struct {
	mu    sync.RWMutex
	strs  []string // interned strings; 0 is ""
	ids   map[string]uint32
	cells []cell
	index map[cellKey]int32
	users map[string]*Sums // totals per end user
	// hours lists each hour's cells; sealed marks the hours whose sums
	// are kept in a record of their own, unsealed those with cells that
	// are not yet (SealRollup).
	hours    map[int32][]int32
	sealed   map[int32]bool
	unsealed map[int32]struct{}
	// last is the cell addCell counted in last and the dimensions that
	// found it (CreatedAt unset: lastHour instead). A gateway's requests
	// mostly repeat the last one's key, model, provider and status, and
	// comparing strings costs less than interning six of them.
	last     record.GenerationDims
	lastHour int32
	lastCell int32 // -1: none yet
}

// rollup is every account's cells.
type rollup struct {
	mu       sync.RWMutex
	accounts map[string]*acctRollup
	// sealedBefore is the hour before which every account's sums are
	// sealed (SealRollup): a generation of an earlier hour is sealed as
	// it is counted.
	sealedBefore atomic.Int32
}

func newRollup() *rollup { return &rollup{accounts: map[string]*acctRollup{}} }

func (r *rollup) account(id string, create bool) *acctRollup {
	r.mu.RLock()
	a := r.accounts[id]
	r.mu.RUnlock()
	if a != nil || !create {
		return a
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if a = r.accounts[id]; a == nil {
		a = &acctRollup{strs: []string{""}, ids: map[string]uint32{"": 0}, index: map[cellKey]int32{}, users: map[string]*Sums{}, lastCell: -1,
			hours: map[int32][]int32{}, sealed: map[int32]bool{}, unsealed: map[int32]struct{}{}}
		r.accounts[id] = a
	}
	return a
}

// intern returns s's id. Callers hold a.mu for writing.
func (a *acctRollup) intern(s string) uint32 {
	if id, ok := a.ids[s]; ok {
		return id
	}
	id := uint32(len(a.strs))
	a.strs = append(a.strs, s)
	a.ids[s] = id
	return id
}

func hourOf(t time.Time) int32 { return int32(t.Unix() / 3600) }

// addCell adds s to the cell of d. Callers hold a.mu for writing.
func (a *acctRollup) addCell(d record.GenerationDims, s Sums) {
	hour := hourOf(d.CreatedAt)
	d.CreatedAt = time.Time{}
	i := a.lastCell
	if i < 0 || hour != a.lastHour || d != a.last {
		i = a.cellOf(hour, d)
		a.last, a.lastHour, a.lastCell = d, hour, i
	}
	a.cells[i].s.Add(s)
	if d.User != "" {
		u := a.users[d.User]
		if u == nil {
			u = &Sums{}
			a.users[d.User] = u
		}
		u.Add(s)
	}
}

// cellOf returns the index of the cell of d in the hour, made if new.
// Callers hold a.mu for writing.
func (a *acctRollup) cellOf(hour int32, d record.GenerationDims) int32 {
	k := cellKey{
		hour: hour, key: a.intern(d.KeyHash), model: a.intern(d.Model),
		provider: a.intern(d.Provider), user: a.intern(d.User), workspace: a.intern(d.WorkspaceID),
		st: a.intern(d.Status), byok: d.BYOK,
	}
	i, ok := a.index[k]
	if !ok {
		i = int32(len(a.cells))
		a.cells = append(a.cells, cell{k: k})
		a.index[k] = i
		a.hours[hour] = append(a.hours[hour], i)
		if !a.sealed[hour] {
			a.unsealed[hour] = struct{}{}
		}
	}
	return i
}

// addGeneration counts one generation record. It reports the account and
// hour when that hour's sums were sealed already (a request that ran
// across the seal): their record must be written again.
func (r *rollup) addGeneration(g record.Generation) (resealAccount string, resealHour int32, reseal bool) {
	s := Sums{Requests: 1, PromptTokens: g.PromptTokens, CompletionTokens: g.CompletionTokens, LatencyMS: g.LatencyMS}
	if len(g.ContentFlags) > 0 {
		s.Flagged = 1
	}
	if g.BYOK {
		// As Settle splits the charge.
		s.Usage = min(max(g.Credits, 0), g.Cost)
		s.BYOKUsage = g.Cost - s.Usage
	} else {
		s.Usage = g.Cost
	}
	a := r.account(g.AccountID, true)
	hour := hourOf(g.CreatedAt)
	a.mu.Lock()
	if hour < r.sealedBefore.Load() {
		// Read under a.mu: SealRollup raises it before it seals the
		// accounts, each under its mu, so a cell is either sealed there
		// or here.
		a.sealed[hour] = true
	}
	a.addCell(record.DimsOf(&g), s)
	reseal = a.sealed[hour]
	a.mu.Unlock()
	return g.AccountID, hour, reseal
}

// addFeedback counts one feedback record on its generation's cell.
func (r *rollup) addFeedback(f record.Feedback) {
	a := r.account(f.AccountID, true)
	a.mu.Lock()
	a.addCell(f.Generation, Sums{Feedback: 1})
	a.mu.Unlock()
}

// Cell is one rollup cell as a query sees it.
type Cell struct {
	Hour time.Time // the UTC hour's start
	// Dim values in the order of Dims.
	Model, Provider, APIKey, EndUser, Workspace, Status string
	BYOK                                                bool
	Sums                                                Sums
	// ids are the interned ids of Model, Provider, APIKey (DimID).
	ids [3]uint32
}

// DimID returns the account's id of the cell's model, provider or API key
// value: a small number, 0 for "", the same for a value as long as the
// store runs, so a caller aggregating thousands of values can index a
// slice rather than hash strings. Other dimensions return 0.
func (c *Cell) DimID(name string) uint32 {
	switch name {
	case DimModel:
		return c.ids[0]
	case DimProvider:
		return c.ids[1]
	case DimAPIKey:
		return c.ids[2]
	}
	return 0
}

// Dim returns the value of the named dimension ("" when unset).
func (c *Cell) Dim(name string) string {
	switch name {
	case DimModel:
		return c.Model
	case DimProvider:
		return c.Provider
	case DimAPIKey:
		return c.APIKey
	case DimEndUser:
		return c.EndUser
	case DimWorkspace:
		return c.Workspace
	case DimStatus:
		return c.Status
	case DimBYOK:
		if c.BYOK {
			return "true"
		}
		return "false"
	}
	return ""
}

// scanChunk is how many cells ScanUsage reads per hold of the account's
// lock, so that a long query never stalls the settlements that add to it.
const scanChunk = 8192

// ScanUsage calls fn for every rollup cell of the account whose hour starts
// in [from, to) (UTC; a partial last hour is included). fn must not call
// back into the store's analytics. The cell passed to fn is reused between
// calls. Cells added while the scan runs may or may not be seen.
func (s *Store) ScanUsage(accountID string, from, to time.Time, fn func(*Cell)) {
	a := s.analytics.account(accountID, false)
	if a == nil {
		return
	}
	lo, hi := hourOf(from), hourOf(to)
	if to.Unix()%3600 != 0 {
		hi++
	}
	a.mu.RLock()
	n := len(a.cells)
	a.mu.RUnlock()
	var c Cell
	for start := 0; start < n; start += scanChunk {
		a.mu.RLock()
		for i := start; i < min(start+scanChunk, n, len(a.cells)); i++ { // dropBefore may shrink cells between chunks
			x := &a.cells[i]
			if x.k.hour < lo || x.k.hour >= hi {
				continue
			}
			c = Cell{
				Hour: time.Unix(int64(x.k.hour)*3600, 0).UTC(), Model: a.strs[x.k.model], Provider: a.strs[x.k.provider],
				APIKey: a.strs[x.k.key], EndUser: a.strs[x.k.user], Workspace: a.strs[x.k.workspace],
				Status: a.strs[x.k.st], BYOK: x.k.byok, Sums: x.s, ids: [3]uint32{x.k.model, x.k.provider, x.k.key},
			}
			fn(&c)
		}
		a.mu.RUnlock()
	}
}

// EndUserUsage returns the totals of an end user's generations.
func (s *Store) EndUserUsage(accountID, user string) Sums {
	a := s.analytics.account(accountID, false)
	if a == nil {
		return Sums{}
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	if u := a.users[user]; u != nil {
		return *u
	}
	return Sums{}
}

// UsageDimValues returns the distinct values seen for a dimension in an
// account's cells, sorted (for tests and discovery).
func (s *Store) UsageDimValues(accountID, dim string) []string {
	seen := map[string]bool{}
	s.ScanUsage(accountID, time.Unix(0, 0), time.Unix(1<<40, 0), func(c *Cell) { seen[c.Dim(dim)] = true })
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// Build fills the rollup from the stored records: the sealed
// hours' sums (loadSealedHours), then the generations of the hours not
// sealed; Open calls it before any write can happen, then subscribes it
// to new generations.
func (s *Store) Build() error {
	s.analytics = newRollup()
	if err := s.loadSealedHours(); err != nil {
		return err
	}
	before, err := s.loadSealedBefore()
	if err != nil {
		return err
	}
	s.generationsRead = 0
	if err := s.k.ScanFrom(record.GenerationPrefix, record.GenerationSlotOfHour(before), func(key, v []byte) (bool, error) {
		s.generationsRead++
		var g record.Generation
		if err := record.DecodeGenerationSums(v, &g); err != nil {
			return false, fmt.Errorf("generation %q: %w", key, err)
		}
		if s.analytics.isSealed(g.AccountID, hourOf(g.CreatedAt)) {
			return true, nil
		}
		s.analytics.addGeneration(g)
		s.EndUsers.EnsureEndUser(g.AccountID, g.User, g.CreatedAt)
		return true, nil
	}); err != nil {
		return err
	}
	s.analytics.sealedBefore.Store(before)
	if err := s.Feedback.LoadFeedback(); err != nil {
		return err
	}
	s.Generations.SubscribeGenerations(func(g record.Generation) { s.CountGeneration(g, true) })
	return nil
}

// CountFeedback adds durable feedback to the rollup.
func (s *Store) CountFeedback(f record.Feedback) { s.analytics.addFeedback(f) }

// CountGeneration adds a settled generation to the rollup (this
// replica's, or another's: its end user, if new, reaches this replica as
// a record, so only this replica's records one).
func (s *Store) CountGeneration(g record.Generation, ownUser bool) {
	accountID, hour, reseal := s.analytics.addGeneration(g)
	newUser := false
	if ownUser && g.User != "" {
		s.k.RLock()
		newUser = !s.EndUsers.HasEndUser(g.AccountID, g.User)
		s.k.RUnlock()
	}
	if !reseal && !newUser {
		return
	}
	s.k.Lock()
	if newUser {
		s.EndUsers.EnsureEndUser(g.AccountID, g.User, g.CreatedAt)
	}
	if reseal {
		s.k.MarkDirty(sealedHourKey(accountID, hour))
	}
	s.k.Unlock()
}
