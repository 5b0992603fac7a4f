// Package storage holds the gateway's state: accounts, keys, credits and
// the counters that cap them, organizations, secrets and analytics, and
// hosts the domain stores kept with their service (SCIM's, through
// RegisterDomain).
// Every read is served from memory, so that the request path
// never waits on disk for a lookup; every write goes through the kernel
// (package storage/kernel), which makes it durable before it returns.
package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/storage/affinity"
	"github.com/tollgate-dev/caddy-tollgate/storage/analytics"
	"github.com/tollgate-dev/caddy-tollgate/storage/byok"
	"github.com/tollgate-dev/caddy-tollgate/storage/codec"
	"github.com/tollgate-dev/caddy-tollgate/storage/destinations"
	"github.com/tollgate-dev/caddy-tollgate/storage/endpoints"
	"github.com/tollgate-dev/caddy-tollgate/storage/endusers"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/keytable"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
	"github.com/tollgate-dev/caddy-tollgate/storage/respcache"
)

// Errors returned by the store; handlers map them to HTTP statuses.
var (
	ErrNotFound = kernel.ErrNotFound
	ErrInvalid  = record.ErrInvalid
	// ErrConflict: the change contradicts the current state (a duplicate,
	// or a workspace that still holds keys).
	ErrConflict = kernel.ErrConflict
	// ErrForbidden: the change is never allowed (the default workspace
	// cannot be deleted).
	ErrForbidden = errors.New("forbidden")
	// ErrClosed: a scan begun, or cut short, when the store closed.
	ErrClosed = kernel.ErrClosed
)

// ErrNotDurable is returned when a write could not be committed in time; the
// kernel keeps retrying it.
var ErrNotDurable = kernel.ErrNotDurable

// now is the store's clock; tests replace it to cross UTC boundaries.
var now = time.Now

// Options configure Open: the kernel's (Redis, when set, selects the
// shared backend for several replicas, Shared, instead of Badger).
type Options = kernel.Options

// Store is the gateway's persistent state: the domain stores over one
// kernel. All methods are safe for concurrent use. Memory is the truth for
// reads; every method that changes state returns only once the change is
// durable, so a caller never acknowledges what a crash would lose. The
// domain stores share the kernel's one lock: admission reads accounts,
// keys, workspaces and members at one instant, and several domains'
// changes (a SCIM sync, deleting a key) are one atomic step.
//
// Who locks. A domain store's exported methods take the kernel's lock,
// once per call (RLock to read, Lock to change), around all the reads and
// writes of the stores they touch, and release it before waiting for
// durability. The unexported methods the stores ask each other through
// (the small interfaces each declares: accountOrgs, orgAccounts, ...)
// never take it: their callers hold it. With one lock among the domain
// stores there is no order to keep between them; the only nesting is the
// kernel's lock, then an analytics rollup account's (the group commit's
// snapshot of a sealed hour), and the rollup never takes the kernel's
// lock while it holds its own. The ledgers' own locks are ordered in
// package sharedledger (its Ledger).
type Store struct {
	k *kernel.Kernel
	*AccountStore
	*LedgerStore
	*OrgStore
	*SecretStore
	*AnalyticsStore
	*EndUserStore
	*DestinationStore
	*EndpointStore
	*FeedbackStore
	// domains are the domain stores kept outside this package
	// (RegisterDomain).
	domains map[string]Domain
	// feed brings other replicas' changes (Shared; one that never
	// changes on Badger); stopFollowing stops following it and the
	// ledger's background work.
	feed          kernel.Feed
	stopFollowing func()
	log           *zap.Logger
	// dir holds the key table's snapshot (keytable.Snapshots.Write); empty: none.
	// keysRestored: Open restored the keys from it, reading keysCaughtUp
	// key records written since (none when keysCurrent), visiting
	// keysVisited records and deletions to find them.
	// stopKeySnapshots stops writing it.
	dir              string
	keysRestored     bool
	keysCaughtUp     int
	keysVisited      int
	keysCurrent      bool // the snapshot was the database's version
	stopKeySnapshots func()
	// recordsRestored, recordsCaughtUp, recordsVisited, recordsCurrent:
	// the same for the records' snapshot (writeRecordSnapshot).
	recordsRestored bool
	recordsCaughtUp int
	recordsVisited  int
	recordsCurrent  bool
	// open: counted in openStores, until the first Close.
	open atomic.Bool
	// affinity keeps the endpoints conversations stick to.
	affinity affinity.Table
	// respCache is the response cache's shared table; nil on one node.
	respCache respcache.Table
}

// bigStore is the number of keys from which Open returns the warm-up's
// garbage to the operating system at once.
const bigStore = 50_000

// openGC counts the Opens under way (lessGC) and those restoring
// snapshots (noGC).
var openGC struct {
	sync.Mutex
	n, prev int
	paused  int
}

// lessGC lets the heap grow to five times what is live, not twice, until
// the function it returns is called (by the last of concurrent Opens):
// the load's decoded records are mostly kept, and at a million keys the
// collections that the default setting runs while they pile up were a
// tenth of a start's CPU. Open hands the garbage back once it is done.
func lessGC() func() {
	openGC.Lock()
	if openGC.n == 0 {
		openGC.prev = debug.SetGCPercent(400)
	}
	openGC.n++
	openGC.Unlock()
	return func() {
		openGC.Lock()
		if openGC.n--; openGC.n == 0 {
			debug.SetGCPercent(openGC.prev)
		}
		openGC.Unlock()
	}
}

// noGC stops the collector until the function it returns is called (by
// the last of concurrent callers; once each), within lessGC: what the
// snapshots' restores allocate is kept, but for the files' buffers, so
// collections meanwhile would only mark it again (at a million keys two
// full collections, a fifth of a clean start's CPU, where the one that
// ends Open now marks it once).
//
// Not while another store of the process is open: it may be serving (a
// reload that opens another directory), and its garbage would pile up.
func noGC() func() {
	openGC.Lock()
	if openStores.Load() > 0 {
		openGC.Unlock()
		return func() {}
	}
	if openGC.paused == 0 {
		debug.SetGCPercent(-1)
	}
	openGC.paused++
	openGC.Unlock()
	return sync.OnceFunc(func() {
		openGC.Lock()
		if openGC.paused--; openGC.paused == 0 {
			debug.SetGCPercent(400) // lessGC's, still in force
		}
		openGC.Unlock()
	})
}

// openStores counts the process's open stores (noGC).
var openStores atomic.Int32

// Open opens (or creates) the database at opts.Dir and loads it into memory.
func Open(opts Options) (*Store, error) {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	b, ledger, err := openBackend(opts, log)
	if err != nil {
		return nil, err
	}
	k := kernel.New(b, log)
	k.ObserveCommits(opts.OnCommit)
	defer lessGC()()
	s := newStore(k, ledger, log)
	s.dir = opts.Dir
	s.registerKinds()
	feedPos, err := s.feed.Position()
	if err != nil {
		_ = k.Close() // opening failed with err, which is returned; closing only frees what was opened
		return nil, err
	}
	gcOn := noGC()
	defer gcOn()
	// The two snapshots touch disjoint state and load side by side: with
	// two cores the start waits for the longer (after a kill -9 the key
	// records' walk), not for both.
	var restored []string
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		restored = s.restoreRecords()
	}()
	keys := s.restoreKeys()
	<-loaded
	if keys {
		restored = append(restored, prefixAPIKey)
	}
	if !s.keysRestored || !s.recordsRestored {
		gcOn() // the records read from Badger leave as much garbage as they keep
	}
	if err := k.Load(restored...); err != nil {
		_ = k.Close() // opening failed with err, which is returned; closing only frees what was opened
		return nil, err
	}
	s.ensureDefaultWorkspaces()
	s.AccountStore.sortKeyIndex()
	if s.keys.Len() >= bigStore {
		// The warm-up's garbage (the snapshots' or the decoded records'
		// buffers) is as large as what it kept: hand it back now, not
		// over minutes; collected before the collector resumes, so that
		// it does not run twice.
		debug.FreeOSMemory()
	}
	gcOn() // before the generations' scan, whose garbage is its own
	if err := s.AnalyticsStore.a.Build(); err != nil {
		_ = k.Close() // opening failed with err, which is returned; closing only frees what was opened
		return nil, fmt.Errorf("building the analytics rollup: %w", err)
	}
	if err := s.follow(feedPos); err != nil {
		_ = k.Close() // opening failed with err, which is returned; closing only frees what was opened
		return nil, err
	}
	k.Start()
	s.AnalyticsStore.a.StartSealing(log)
	s.startKeySnapshots(s.keysCurrent, s.recordsCurrent)
	s.open.Store(true)
	openStores.Add(1)
	return s, nil
}

// Close commits what is pending, stops background work and closes the
// database.
func (s *Store) Close() error {
	if s.open.CompareAndSwap(true, false) {
		openStores.Add(-1)
	}
	s.AnalyticsStore.a.StopSealing()
	if s.stopFollowing != nil {
		s.stopFollowing()
	}
	if s.stopKeySnapshots != nil {
		s.stopKeySnapshots()
	}
	err := s.k.Close()
	s.saveSnapshots()
	return err
}

// removeTemporaries removes the temporary files of a snapshot that was
// being written when the process died.
func removeTemporaries(dir, file string) {
	tmps, _ := filepath.Glob(filepath.Join(dir, file+".*"))
	for _, tmp := range tmps {
		_ = os.Remove(tmp) // a leftover of a dead process: one that stays is removed at the next start
	}
}

// restoreKeys restores the key table from its snapshot and brings it up to
// date with the database (catchUpKeys); false: the key records must be
// loaded.
func (s *Store) restoreKeys() bool {
	if s.dir == "" || !s.k.Versioned() {
		return false
	}
	removeTemporaries(s.dir, keytable.SnapshotFile)
	began := time.Now()
	r, err := keytable.Read(s.dir, s.keys)
	if err == nil {
		if v, clean := s.k.OpenVersion(); !clean || v != r.Version || len(r.Changed) > 0 {
			s.keysCaughtUp, s.keysVisited, err = s.catchUpKeys(r)
		} else {
			s.keysCurrent = true
		}
	}
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("not using the key table's snapshot; loading the key records", zap.Error(err))
		}
		s.keys.Reset()
		s.keysCaughtUp, s.keysVisited, s.keysCurrent = 0, 0, false
		return false
	}
	s.k.ObserveSeq(r.Seq)
	s.keyIdx = keytable.IndexOf(s.keys)
	s.keysRestored = true
	s.log.Info("key table restored from its snapshot", zap.Int("keys", s.keys.Len()),
		zap.Int("records_read", s.keysCaughtUp), zap.Int("records_visited", s.keysVisited), zap.Duration("took", time.Since(began)))
	return true
}

// catchUpKeys brings a table restored from a snapshot of version r.Version
// up to date from what changed since (changesSince): it reads the key
// records written since and those of the keys changed while the snapshot
// was taken, and drops the keys deleted since. It returns how many
// records it read and how many it visited. An error, on any doubt, means
// the table is not usable.
func (s *Store) catchUpKeys(r keytable.Restored) (read, visited int, err error) {
	t := s.keys
	changed := make([]string, len(r.ChangedHashes))
	for i, h := range r.ChangedHashes {
		changed[i] = prefixAPIKey + h
	}
	visited, err = s.changesSince(prefixAPIKey, r.Version, changed, func(key, v []byte) error {
		read++
		hash := codec.BytesString(key[len(prefixAPIKey):]) // only during the call
		var k APIKey
		if err := record.DecodeAPIKey(v, &k); err != nil {
			return fmt.Errorf("loading record %q: %w", key, err)
		}
		if k.Hash != hash {
			return fmt.Errorf("the record %q holds key %q", key, k.Hash)
		}
		t.Put(&k)
		s.k.ObserveSeq(k.Seq)
		return nil
	}, func(key []byte) error {
		t.Remove(codec.BytesString(key[len(prefixAPIKey):]))
		return nil
	})
	return read, visited, err
}

// changesSince walks what changed under prefix (a kind with LogDeletes)
// after a snapshot of version v, not every record: put gets each record
// written since (its latest value), gone each record deleted since and
// not written again; then each key of changed (records changed while the
// snapshot was taken: their copy is not trusted) not met yet is read
// back, put as the database holds it or gone. A deletion after v is
// found in the deletion log, not from its tombstone, which compaction
// may have dropped. key and value are valid only during a call. It
// returns how many records and deletions it visited; an error when the
// database is older than the snapshot.
func (s *Store) changesSince(prefix string, v uint64, changed []string, put func(key, value []byte) error, gone func(key []byte) error) (int, error) {
	visited := 0
	met := map[string]struct{}{}
	at, err := s.k.ScanVersions(prefix, v, func(key []byte, _ uint64, value func(func([]byte) error) error) (bool, error) {
		visited++
		met[string(key)] = struct{}{}
		return true, value(func(b []byte) error { return put(key, b) })
	})
	if err != nil {
		return visited, err
	}
	if at < v {
		return visited, fmt.Errorf("the database (version %d) is older than the snapshot (%d)", at, v)
	}
	err = s.k.ScanDeletions(prefix, v, func(key []byte) error {
		visited++
		if _, again := met[string(key)]; again {
			return nil // written again after its deletion: read above
		}
		met[string(key)] = struct{}{}
		return gone(key)
	})
	if err != nil {
		return visited, err
	}
	for _, key := range changed {
		if _, ok := met[key]; ok {
			continue
		}
		visited++
		err := s.k.Get(key, func(b []byte) error { return put([]byte(key), b) })
		if errors.Is(err, kernel.ErrNotFound) {
			err = gone([]byte(key))
		}
		if err != nil {
			return visited, err
		}
	}
	return visited, nil
}

// forgetDeletions drops the deletion log's entries under prefixes at
// most v, once a snapshot of v holding their records is durably in
// place: each of those deletions was committed before v was read, so the
// snapshot lacks the record or holds it created again.
func forgetDeletions(k *kernel.Kernel, v uint64, prefixes ...string) error {
	for _, p := range prefixes {
		if _, err := k.ForgetDeletions(p, v); err != nil {
			return err
		}
	}
	return nil
}

// keySnapshotEvery is how often the key table's snapshot is written while
// keys change, so that a start after a crash reads only the key records
// written since (a variable for the tests).
var keySnapshotEvery = time.Minute

// startKeySnapshots writes the key table's snapshot every
// keySnapshotEvery when keys changed since the last one (or the one on
// disk is not current: fresh false), and the records' snapshot likewise
// (recordsFresh), until stopKeySnapshots.
func (s *Store) startKeySnapshots(fresh, recordsFresh bool) {
	if s.dir == "" || !s.k.Versioned() {
		return
	}
	stop, done := make(chan struct{}), make(chan struct{})
	keys := newChangeWatch(s.k, []string{prefixAPIKey}, fresh, s.snapshotKeys)
	records := newChangeWatch(s.k, prefixesOf(s.snapKinds()), recordsFresh, s.snapshotRecords)
	go func() {
		defer close(done)
		tick := time.NewTicker(keySnapshotEvery)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				keys.end()
				records.end()
				return
			case <-tick.C:
			}
			if err := keys.tick(); err != nil {
				s.log.Warn("writing the key table's snapshot failed; retrying later", zap.Error(err))
			}
			if err := records.tick(); err != nil {
				s.log.Warn("writing the records' snapshot failed; retrying later", zap.Error(err))
			}
		}
	}()
	s.stopKeySnapshots = func() { close(stop); <-done }
}

// changeWatch writes a snapshot when the records under its prefixes
// changed since the last one it wrote.
type changeWatch struct {
	k      *kernel.Kernel
	since  []*kernel.Tracker
	stale  bool
	write  func() error
	prefix []string
}

func newChangeWatch(k *kernel.Kernel, prefixes []string, fresh bool, write func() error) *changeWatch {
	w := &changeWatch{k: k, stale: !fresh, write: write, prefix: prefixes}
	k.Lock()
	for _, p := range prefixes {
		w.since = append(w.since, k.Track(p, false))
	}
	k.Unlock()
	return w
}

// tick writes the snapshot if anything changed since the last (the
// trackers restart before it is taken: a change during it counts for the
// next).
func (w *changeWatch) tick() error {
	w.k.Lock()
	for i, t := range w.since {
		if t.Changes() > 0 {
			w.stale = true
			w.k.EndTrack(t)
			w.since[i] = w.k.Track(w.prefix[i], false)
		}
	}
	w.k.Unlock()
	if !w.stale {
		return nil
	}
	if err := w.write(); err != nil {
		return err
	}
	w.stale = false
	return nil
}

func (w *changeWatch) end() {
	w.k.Lock()
	for _, t := range w.since {
		w.k.EndTrack(t)
	}
	w.k.Unlock()
}

// snapshotKeys writes the key table's snapshot of the running store.
func (s *Store) snapshotKeys() error {
	v, err := s.k.ReadVersion() // before the snapshot begins
	if err != nil {
		return err
	}
	return s.keySnapshots().Write(s.keys, v, true)
}

// saveSnapshots writes the key table's and the records' snapshots after a
// clean close: when the database holds every change memory does, and
// will open on that version.
func (s *Store) saveSnapshots() {
	if s.dir == "" || !s.k.Versioned() {
		return
	}
	s.k.Lock()
	v, ok := s.k.ClosedVersion()
	s.k.Unlock()
	if !ok {
		return // the periodic snapshots stay: older, still right
	}
	if err := s.keySnapshots().Write(s.keys, v, false); err != nil {
		s.log.Warn("writing the key table's snapshot failed; the next start reads more key records", zap.Error(err))
	}
	if err := writeRecordSnapshot(s.dir, v, s.k, s.snapKinds(), false); err != nil {
		s.log.Warn("writing the records' snapshot failed; the next start reads more records", zap.Error(err))
	}
}

// newStore makes the domain stores over k and the ledger that runs on its
// backend, and wires each store to the others it reads.
func newStore(k *kernel.Kernel, ledger openLedger, log *zap.Logger) *Store {
	s := &Store{
		k:         k,
		feed:      k.Feed(),
		log:       log,
		affinity:  affinityFor(k.Backend()),
		respCache: sharedResponseCache(k.Backend()),
		AccountStore: &AccountStore{
			k:         k,
			accounts:  map[string]*Account{},
			keys:      keytable.New(),
			mgmtKeys:  map[string]*ManagementKey{},
			keyIdx:    keytable.Index{},
			mgmtIdx:   mgmtKeyIndex{},
			purchases: map[string][]Purchase{},
			codes:     map[string]*ConnectCode{},
		},
		LedgerStore: &LedgerStore{k: k},
		OrgStore: &OrgStore{
			k:          k,
			members:    kernel.Records[Member]{},
			workspaces: kernel.Records[Workspace]{},
			guardrails: kernel.Records[Guardrail]{},
		},
		AnalyticsStore: &AnalyticsStore{analytics.New(k)},
		FeedbackStore:  &FeedbackStore{k: k},
	}
	clock := func() time.Time { return now() }
	accts := storeAccounts{s.AccountStore}
	s.SecretStore = byok.New(k, accts, storeWorkspaces{s.OrgStore}, clock)
	s.EndUserStore = endusers.New(k, accts, clock)
	s.DestinationStore = destinations.New(k, accts, clock)
	s.EndpointStore = endpoints.New(k, accts, clock)
	s.wire()
	s.LedgerStore.impl = ledger(s)
	s.newDomains()
	return s
}

// ensureDefaultWorkspaces gives the records stored before workspaces
// existed their account's default workspace: the accounts an id for it
// first, then the organizations its record, then the credentials.
func (s *Store) ensureDefaultWorkspaces() {
	s.AccountStore.ensureDefaultWorkspaceIDs()
	s.OrgStore.ensureDefaultWorkspaces()
	byok.EnsureWorkspaces(s.SecretStore)
}

// wire points each domain store at the others it asks, each through the
// small interface it declares (accountOrgs, orgAccounts, ...); the
// stores kept in packages of their own are given theirs by newStore.
func (s *Store) wire() {
	s.AccountStore.org = s.OrgStore
	s.AnalyticsStore.a.Use(analytics.Sources{
		Keys: analyticsKeys{s.AccountStore}, Generations: s.LedgerStore,
		EndUsers: analyticsEndUsers{s.EndUserStore}, Feedback: analyticsFeedback{s.FeedbackStore},
		Now: func() time.Time { return now() },
	})
	s.FeedbackStore.stats = s.AnalyticsStore.a
	s.OrgStore.acct = s.AccountStore
	s.OrgStore.sec = orgCredentials{s.SecretStore}
}

// registerKinds registers every domain store's kinds of record with the
// kernel, in load order: the organizations' usage counters decorate the
// workspaces and members loaded before them; the outside domain stores'
// come last.
func (s *Store) registerKinds() {
	snapshotted := s.snapshotPrefixes()
	for _, kinds := range [][]kernel.Kind{
		s.AccountStore.kinds(), s.SecretStore.Kinds(), s.EndUserStore.Kinds(),
		s.DestinationStore.Kinds(), s.EndpointStore.Kinds(), s.OrgStore.kinds(),
		s.LedgerStore.withExpiry(s.LedgerStore.kinds()), s.AnalyticsStore.a.Kinds(), s.FeedbackStore.kinds(), s.domainKinds(),
	} {
		for i := range kinds {
			kinds[i].LogDeletes = slices.Contains(snapshotted, kinds[i].Prefix)
		}
		s.k.Register(kinds...)
	}
}

// snapshotPrefixes are the kinds the two snapshots hold: their deletions
// are logged, so that a start after a crash reads only what changed
// since the snapshots (changesSince).
func (s *Store) snapshotPrefixes() []string {
	return append(prefixesOf(s.snapKinds()), prefixAPIKey)
}
