package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/storage/codec"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/keytable"
)

// The records' snapshot does for accounts, their purchases and management
// keys, and workspaces what the key table's does for keys
// (keytable.Snapshots.Write): at a million keys these 400,000 records were most of
// what a start still read from Badger and decoded. They are written to
// one file with the database version V it reflects, compactly
// (encodeAccount and its kin), at a clean close and every keySnapshotEvery while
// they change; a start loads them from it instead of from Badger.
//
// The rules are the key table's: a record that is neither dirty nor being
// committed holds in memory what the database holds. The file is taken
// after V was read, each kind's records collected under the read lock
// (in one pass or in steps) and encoded after (a published record is
// never modified); the records changed meanwhile are tracked and listed
// as changed, so the others' values are the same at every step. A start
// after a clean close at V loads the file alone. Otherwise it reads what
// changed since, as the key table's does (changesSince): the records
// written after V or changed while the file was taken are read from the
// database, those deleted after V left out, and every other record is
// the file's, merged in key order with the records read. A damaged file,
// another layout, or a database older than V: every record is read from
// the database, as before.

// v3: written by a build that logs deletions (as the key table's).
// v4: accounts and workspaces carry their rate limits.
const (
	recordSnapshotFile  = "records.snapshot"
	recordSnapshotMagic = "tollgate records v4\n"
)

// snapKind is one kind of record in the snapshot. collect returns every
// record's key and its published value (never modified afterwards),
// taking the lock itself; encode appends a value's snapshot form; load
// publishes a record from that form at a start, as the kind's Load does
// from the database's; dbLoad is the kind's Load; reset empties the kind;
// keyOf, when set, makes the keys collect leaves empty (outside the lock);
// grow, when set, sizes the kind's empty maps for n records first (their
// growth was a tenth of loading them).
type snapKind struct {
	prefix  string
	collect func(k *kernel.Kernel) []snapRecord
	keyOf   func(v any) string
	encode  func(b []byte, v any) ([]byte, error)
	load    func(key, value []byte, strs *codec.StrArena) error
	dbLoad  func(key, value []byte) error
	reset   func()
	grow    func(n int)
}

// prefixesOf lists the kinds' prefixes.
func prefixesOf(kinds []snapKind) []string {
	prefixes := make([]string, len(kinds))
	for i, kind := range kinds {
		prefixes[i] = kind.prefix
	}
	return prefixes
}

// snapRecord is a record collected for the snapshot: its key after the
// kind's prefix, and its value.
type snapRecord struct {
	key string
	v   any
}

// recordSnapshotHeader follows the magic; the body follows it, then the
// CRC-32C of the magic and header. The body holds, for each kind, its
// prefix, its number of records and each record's key (after the prefix)
// and value, in key order, then the changed records' keys; each key and
// value length-prefixed (uvarint).
type recordSnapshotHeader struct {
	Version uint64
	Kinds   uint64
	Changed uint64
	BodyLen uint64
	BodyCRC uint64
}

// snapshotChunk is how many keys' slots (or counters) one step of the key
// table's snapshot copies under the lock (keytable.DefaultChunk).
// snapshotStep, when set, runs between the steps of either snapshot
// (tests change records there).
var (
	snapshotChunk = keytable.DefaultChunk
	snapshotStep  func()
)

// keySnapshots writes the key table's snapshots (package keytable).
func (s *Store) keySnapshots() keytable.Snapshots {
	return keytable.Snapshots{Dir: s.dir, Kernel: s.k, Prefix: prefixAPIKey, Chunk: snapshotChunk, Step: func() {
		if snapshotStep != nil {
			snapshotStep()
		}
	}}
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// writeRecordSnapshot writes the records of kinds to dir for the database
// at version v (read before it began), through a temporary file renamed
// into place. sync: make the database durable first (the file must never
// be ahead of it after a power loss), and once the file is in place drop
// the deletion log's entries it makes redundant (as the key table's, keytable.Snapshots.Write).
func writeRecordSnapshot(dir string, v uint64, k *kernel.Kernel, kinds []snapKind, sync bool) error {
	k.Lock()
	trackers := make([]*kernel.Tracker, len(kinds))
	for i, kind := range kinds {
		trackers[i] = k.Track(kind.prefix, true)
	}
	k.Unlock()
	recs := make([][]snapRecord, len(kinds))
	for i, kind := range kinds {
		recs[i] = kind.collect(k)
		if snapshotStep != nil {
			snapshotStep()
		}
	}
	k.Lock()
	var changed []string
	for _, tr := range trackers {
		k.EndTrack(tr)
		for key := range tr.Keys() {
			changed = append(changed, key)
		}
	}
	k.Unlock()
	file, err := recordSnapshotBytes(v, kinds, recs, changed)
	if err != nil {
		return err
	}
	if err := replaceFile(dir, recordSnapshotFile, file, k, sync); err != nil || !sync {
		return err
	}
	return forgetDeletions(k, v, prefixesOf(kinds)...)
}

// recordSnapshotBytes is the snapshot file of version v holding each
// kind's records and listing the changed ones.
func recordSnapshotBytes(v uint64, kinds []snapKind, recs [][]snapRecord, changed []string) ([]byte, error) {
	// The header goes in front of the body once the body is known: one
	// buffer, not a copy of it (tens of megabytes at a million keys).
	hdrLen := len(recordSnapshotMagic) + binary.Size(recordSnapshotHeader{})
	b := make([]byte, hdrLen, hdrLen+1<<20)
	for i, kind := range kinds {
		var err error
		if b, err = appendSnapKind(b, kind, recs[i]); err != nil {
			return nil, err
		}
	}
	for _, key := range changed {
		b = codec.AppendBytes(b, key)
	}
	body := b[hdrLen:]
	h := recordSnapshotHeader{Version: v, Kinds: uint64(len(kinds)), Changed: uint64(len(changed)),
		BodyLen: uint64(len(body)), BodyCRC: uint64(crc32.Checksum(body, crcTable))}
	hdr := append(b[:0:hdrLen], recordSnapshotMagic...)
	if hdr, err := binary.Append(hdr, binary.LittleEndian, h); err != nil || len(hdr) != hdrLen {
		return nil, errors.Join(errors.New("the records' snapshot's header does not fit its place"), err)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[:hdrLen], crcTable)), nil
}

// appendSnapKind appends a kind's section: its records sorted by key, as
// the database walks them.
func appendSnapKind(b []byte, kind snapKind, recs []snapRecord) ([]byte, error) {
	if kind.keyOf != nil {
		for i := range recs {
			recs[i].key = kind.keyOf(recs[i].v)
		}
	}
	slices.SortFunc(recs, func(a, b snapRecord) int { return strings.Compare(a.key, b.key) })
	b = codec.AppendBytes(b, kind.prefix)
	b = binary.AppendUvarint(b, uint64(len(recs)))
	var val []byte
	for _, r := range recs {
		var err error
		if val, err = kind.encode(val[:0], r.v); err != nil {
			return b, fmt.Errorf("encoding record %q: %w", kind.prefix+r.key, err)
		}
		b = codec.AppendBytes(b, r.key)
		b = codec.AppendBytes(b, val)
	}
	return b, nil
}

// replaceFile writes data to dir/name through a synced temporary file.
func replaceFile(dir, name string, data []byte, k *kernel.Kernel, sync bool) error {
	tmp, err := os.CreateTemp(dir, name+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // after the rename: nothing
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close() // the write failed with err, which is returned
		return err
	}
	return k.PutInPlace(tmp, dir, name, sync)
}

// recordSnapshot is a snapshot read back: its version, each kind's
// records (slices of the file's bytes) and the changed records' keys.
type recordSnapshot struct {
	version uint64
	kinds   []snapSection
	changed map[string]struct{}
	strs    codec.StrArena // the loaded records' strings
}

type snapSection struct {
	prefix string
	keys   [][]byte
	values [][]byte
}

var errRecordSnapshotDamaged = errors.New("the records' snapshot is damaged or truncated")

// readRecordSnapshot reads and checks dir's records snapshot.
// os.ErrNotExist when there is none.
func readRecordSnapshot(dir string) (*recordSnapshot, error) {
	data, err := os.ReadFile(filepath.Join(dir, recordSnapshotFile))
	if err != nil {
		return nil, err
	}
	var h recordSnapshotHeader
	hdrLen := len(recordSnapshotMagic) + binary.Size(h)
	if len(data) < hdrLen+4 || string(data[:len(recordSnapshotMagic)]) != recordSnapshotMagic {
		return nil, errRecordSnapshotDamaged
	}
	if binary.LittleEndian.Uint32(data[len(data)-4:]) != crc32.Checksum(data[:hdrLen], crcTable) {
		return nil, errors.New("the records' snapshot's header fails its checksum")
	}
	if _, err := binary.Decode(data[len(recordSnapshotMagic):hdrLen], binary.LittleEndian, &h); err != nil {
		return nil, errRecordSnapshotDamaged
	}
	body := data[hdrLen : len(data)-4]
	if h.BodyLen != uint64(len(body)) {
		return nil, errRecordSnapshotDamaged
	}
	if uint64(crc32.Checksum(body, crcTable)) != h.BodyCRC {
		return nil, errors.New("the records' snapshot fails its checksum")
	}
	r := &recordSnapshot{version: h.Version}
	p := codec.NewBinReader(body, nil)
	for range min(h.Kinds, uint64(len(body))) {
		sec := snapSection{prefix: string(p.Bytes())}
		n := p.Uvarint()
		if n > uint64(len(body)) {
			return nil, errRecordSnapshotDamaged
		}
		sec.keys, sec.values = make([][]byte, 0, n), make([][]byte, 0, n)
		for i := range n {
			key, value := p.Bytes(), p.Bytes()
			if p.Bad() || i > 0 && string(key) <= string(sec.keys[i-1]) {
				return nil, errRecordSnapshotDamaged
			}
			sec.keys, sec.values = append(sec.keys, key), append(sec.values, value)
		}
		r.kinds = append(r.kinds, sec)
	}
	r.changed = make(map[string]struct{}, min(h.Changed, uint64(len(body))))
	for range min(h.Changed, uint64(len(body))) {
		r.changed[string(p.Bytes())] = struct{}{}
	}
	if p.Bad() || p.Rest() != 0 || uint64(len(r.kinds)) != h.Kinds || uint64(len(r.changed)) > h.Changed {
		return nil, errRecordSnapshotDamaged
	}
	return r, nil
}

// restoreRecords loads the snapshotted kinds from the records' snapshot
// and brings them up to date with the database; it returns their
// prefixes, or nil when they must be loaded from the database (every
// kind emptied again).
func (s *Store) restoreRecords() []string {
	if s.dir == "" || !s.k.Versioned() {
		return nil
	}
	removeTemporaries(s.dir, recordSnapshotFile)
	began := time.Now()
	kinds := s.snapKinds()
	r, err := readRecordSnapshot(s.dir)
	if err == nil {
		v, clean := s.k.OpenVersion()
		s.recordsCurrent = clean && v == r.version && len(r.changed) == 0
		s.recordsCaughtUp, s.recordsVisited, err = s.loadRecordSnapshot(r, kinds)
	}
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("not using the records' snapshot; loading the records", zap.Error(err))
		}
		for _, kind := range kinds {
			kind.reset()
		}
		s.recordsCaughtUp, s.recordsVisited, s.recordsCurrent = 0, 0, false
		return nil
	}
	s.recordsRestored = true
	n := 0
	for _, sec := range r.kinds {
		n += len(sec.keys)
	}
	s.log.Info("records restored from their snapshot", zap.Int("records", n),
		zap.Int("records_read", s.recordsCaughtUp), zap.Int("records_visited", s.recordsVisited), zap.Duration("took", time.Since(began)))
	return prefixesOf(kinds)
}

// loadRecordSnapshot loads r's records, kind by kind, and returns how
// many records it read from the database instead, and how many records
// and deletions it visited to find them.
func (s *Store) loadRecordSnapshot(r *recordSnapshot, kinds []snapKind) (read, visited int, err error) {
	if len(r.kinds) != len(kinds) {
		return 0, 0, fmt.Errorf("the records' snapshot holds %d kinds, this build %d", len(r.kinds), len(kinds))
	}
	var key []byte
	for i, kind := range kinds {
		sec := r.kinds[i]
		if sec.prefix != kind.prefix {
			return read, visited, fmt.Errorf("the records' snapshot holds kind %q where this build has %q", sec.prefix, kind.prefix)
		}
		if kind.grow != nil {
			kind.grow(len(sec.keys))
		}
		if !s.recordsCurrent {
			n, m, err := s.catchUpKind(r, kind, sec)
			read, visited = read+n, visited+m
			if err != nil {
				return read, visited, err
			}
			continue
		}
		for j, k := range sec.keys {
			key = append(append(key[:0], kind.prefix...), k...)
			if err := kind.load(key, sec.values[j], &r.strs); err != nil {
				return read, visited, fmt.Errorf("the records' snapshot's record %q: %w", key, err)
			}
		}
	}
	return read, visited, nil
}

// catchUpKind loads a kind from a snapshot older than the database (or
// taken while records changed): the snapshot's records but for those
// that changed since (changesSince), read from the database or left out,
// in key order as a full load reads them (a kind may depend on it:
// purchases are appended to their account's list). It returns how many
// records it read from the database, and how many it visited.
func (s *Store) catchUpKind(r *recordSnapshot, kind snapKind, sec snapSection) (read, visited int, err error) {
	var changed []string
	for key := range r.changed {
		if strings.HasPrefix(key, kind.prefix) {
			changed = append(changed, key)
		}
	}
	since := map[string][]byte{} // by key after the prefix; nil: gone
	visited, err = s.changesSince(kind.prefix, r.version, changed, func(key, v []byte) error {
		read++
		since[string(key[len(kind.prefix):])] = append([]byte{}, v...)
		return nil
	}, func(key []byte) error {
		since[string(key[len(kind.prefix):])] = nil
		return nil
	})
	if err != nil {
		return read, visited, err
	}
	ids := slices.Sorted(maps.Keys(since))
	var key []byte
	next := 0
	fromDB := func(id string) error { // ids[next], as the database holds it
		next++
		v := since[id]
		if v == nil {
			return nil
		}
		key = append(append(key[:0], kind.prefix...), id...)
		if err := kind.dbLoad(key, v); err != nil {
			return fmt.Errorf("loading record %q: %w", key, err)
		}
		return nil
	}
	for j, id := range sec.keys {
		for next < len(ids) && ids[next] < string(id) {
			if err := fromDB(ids[next]); err != nil {
				return read, visited, err
			}
		}
		if next < len(ids) && ids[next] == string(id) {
			if err := fromDB(ids[next]); err != nil {
				return read, visited, err
			}
			continue
		}
		key = append(append(key[:0], kind.prefix...), id...)
		if err := kind.load(key, sec.values[j], &r.strs); err != nil {
			return read, visited, fmt.Errorf("the records' snapshot's record %q: %w", key, err)
		}
	}
	for next < len(ids) {
		if err := fromDB(ids[next]); err != nil {
			return read, visited, err
		}
	}
	return read, visited, nil
}

// snapshotRecords writes the records' snapshot of the running store.
func (s *Store) snapshotRecords() error {
	v, err := s.k.ReadVersion() // before the snapshot begins
	if err != nil {
		return err
	}
	return writeRecordSnapshot(s.dir, v, s.k, s.snapKinds(), true)
}
