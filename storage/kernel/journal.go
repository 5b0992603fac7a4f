package kernel

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"
)

// The journal is the on-disk Badger backend's commit path. Each group
// commit is one append to a journal file (one write system call); a
// checkpoint moves the journal's writes into Badger in the background,
// coalesced, then deletes the files it moved. A Badger transaction costs
// about 15 µs of CPU however small, and Badger encodes every entry twice
// (value log and memtable log): committed straight to Badger, storage was
// about 10 µs of CPU per request in profiles of bench/run.sh's chain.
// Through the journal an account's record rewritten by a thousand commits
// in a second reaches Badger once, in one transaction with every other
// record of that second (BenchmarkJournalCommit against
// BenchmarkBadgerCommit).
//
// Durability is Badger's: a commit returns once its frame is written to
// the file (and fsynced with SyncWrites), as Badger's commit returns once
// its memory-mapped logs hold the entries; both survive a crash of the
// process. Opening reads every journal file back into memory, where Get
// finds it, and the first Scan (the kernel's Load, after the kinds are
// registered) moves it into Badger before reading.
//
// A file is the magic, then frames: payload length and CRC-32C (4 bytes
// each, little-endian), then the payload, one commit's writes, each an op
// byte ('s' set, 'd' delete), the key's length (uvarint) and key, and for
// a set the value's length (uvarint) and value. A frame cut short or
// failing its CRC ends the file's replay: it is the tail of a write a
// crash or a failed write tore, which no caller was told had committed;
// frames after it are never written to the same file.

const (
	journalMagic  = "TGJRNL01"
	journalPrefix = "journal-"
	journalSuffix = ".log"
	frameHeader   = 8
	// checkpointEvery is how often the journal moves into Badger;
	// checkpointBytes moves it sooner when a file grows past it, which
	// bounds the memory the journal's not yet moved writes hold.
	checkpointEvery      = time.Second
	checkpointBytes      = 8 << 20
	maxCheckpointBackoff = 30 * time.Second
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// removeJournal deletes a moved journal file (a variable for the tests).
var removeJournal = os.Remove

// journal is a Backend: Badger with its commits journaled.
type journal struct {
	db   *badgerBackend
	dir  string
	sync bool
	log  *zap.Logger

	commitMu   sync.Mutex // one Commit at a time: guards writeBytes
	writeBytes int        // the last commit's frame bytes per write

	mu   sync.Mutex
	f    *os.File
	seq  uint64 // the current file's number
	size int64  // bytes in the current file
	torn bool   // the last write failed: the next one starts a new file
	// recent holds the writes of files, the current one last; a nil
	// value is a deletion. moving holds the writes of movingFiles while a
	// checkpoint writes them to Badger (and after it failed to).
	recent      map[string][]byte
	files       []string
	moving      map[string][]byte
	movingFiles []string
	chunkers    []chunker // the kinds with a Slot, stored by chunk

	ckMu sync.Mutex // one checkpoint at a time
	// undeleted are moved files not deleted yet (deleteMoved), under ckMu.
	undeleted []string
	running   sync.Once // the checkpoint loop, from the first commit
	kick      chan struct{}
	stop      chan struct{}
	done      chan struct{}

	// opened and closed are Badger's version when it opened with no
	// journal to replay and when it closed with everything checkpointed
	// (Versioned); zero: none.
	opened, closed uint64
}

// rawValue is a value already encoded, handed to Badger as it is.
type rawValue []byte

func (r rawValue) MarshalJSON() ([]byte, error) { return r, nil }

// openJournal reads the journal files under dir/journal back (their
// writes are moved into Badger by the first checkpoint: the first Scan,
// which the kernel's Load is, once the kinds are registered, so that their
// records are chunked) and starts a new file. Checkpoints start with the
// first commit.
func openJournal(db *badgerBackend, dir string, sync bool, log *zap.Logger) (*journal, error) {
	j := &journal{
		db: db, dir: filepath.Join(dir, "journal"), sync: sync, log: log,
		recent: map[string][]byte{},
		kick:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	if err := os.MkdirAll(j.dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the journal directory: %w", err)
	}
	if err := j.replay(); err != nil {
		return nil, err
	}
	if j.moving == nil {
		j.opened = db.db.MaxVersion()
	}
	if err := j.rotate(); err != nil {
		return nil, err
	}
	return j, nil
}

func (j *journal) loaded() { j.db.loaded() }

// OpenVersion and ClosedVersion implement Versioned.
func (j *journal) OpenVersion() (uint64, bool)   { return j.opened, j.opened != 0 }
func (j *journal) ClosedVersion() (uint64, bool) { return j.closed, j.closed != 0 }

// ReadVersion implements Versioned: Badger's read timestamp (which waits
// for the commits that have one) after a checkpoint.
func (j *journal) ReadVersion() (uint64, error) {
	if err := j.checkpoint(); err != nil {
		return 0, err
	}
	txn := j.db.db.NewTransaction(false)
	defer txn.Discard()
	return txn.ReadTs(), nil
}

// ScanVersions implements Versioned. The iteration reads keys only:
// records of 256 bytes and more are in the value log, and a caller that
// has most of them in memory already reads only the changed ones.
func (j *journal) ScanVersions(prefix string, since uint64, fn func(key []byte, version uint64, value func(func([]byte) error) error) (bool, error)) (uint64, error) {
	if err := j.checkpoint(); err != nil {
		return 0, err
	}
	j.mu.Lock()
	chunked := strings.HasPrefix(chunkPrefix, prefix)
	for _, c := range j.chunkers {
		chunked = chunked || strings.HasPrefix(c.prefix, prefix) || strings.HasPrefix(prefix, c.prefix)
	}
	j.mu.Unlock()
	if chunked {
		return 0, fmt.Errorf("journal: no versioned scan of the chunked records under %q", prefix)
	}
	txn := j.db.db.NewTransaction(false)
	defer txn.Discard()
	opts := badger.DefaultIteratorOptions
	opts.Prefix = []byte(prefix)
	opts.PrefetchValues = false
	opts.SinceTs = since // whole tables older than since are skipped
	it := txn.NewIterator(opts)
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		more, err := fn(item.Key(), item.Version(), item.Value)
		if err != nil || !more {
			return txn.ReadTs(), err
		}
	}
	return txn.ReadTs(), nil
}

// Sync implements Versioned: the journal's files not yet moved, then
// Badger's logs (which hold what the moved ones held).
func (j *journal) Sync() error {
	j.mu.Lock()
	var files []string
	if j.f != nil {
		files = append(files, j.f.Name())
	}
	files = append(append(files, j.files...), j.movingFiles...)
	j.mu.Unlock()
	for _, name := range files {
		f, err := os.Open(name)
		if errors.Is(err, os.ErrNotExist) {
			continue // moved into Badger and deleted: synced below
		}
		if err != nil {
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return j.db.db.Sync()
}

// journalFiles lists the journal's files in the order they were written.
func (j *journal) journalFiles() ([]string, uint64, error) {
	entries, err := os.ReadDir(j.dir)
	if err != nil {
		return nil, 0, err
	}
	type file struct {
		name string
		n    uint64
	}
	var files []file
	for _, e := range entries {
		num, ok := strings.CutPrefix(e.Name(), journalPrefix)
		if ok {
			num, ok = strings.CutSuffix(num, journalSuffix)
		}
		n, err := strconv.ParseUint(num, 10, 64)
		if !ok || err != nil {
			continue
		}
		files = append(files, file{e.Name(), n})
	}
	slices.SortFunc(files, func(a, b file) int { return cmp.Compare(a.n, b.n) })
	names := make([]string, len(files))
	var last uint64
	for i, f := range files {
		names[i], last = f.name, f.n
	}
	return names, last, nil
}

// replay reads every journal file's writes, later ones over earlier ones,
// into moving: the next checkpoint moves them into Badger, then deletes
// the files. Writing a record again is harmless, so a crash before the
// files are deleted only means replaying them again.
func (j *journal) replay() error {
	names, last, err := j.journalFiles()
	if err != nil {
		return fmt.Errorf("reading the journal directory: %w", err)
	}
	j.seq = last
	merged := map[string][]byte{}
	for _, name := range names {
		path := filepath.Join(j.dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("reading journal %s: %w", name, err)
		}
		n, err := readJournal(data, func(key string, value []byte) { merged[key] = value })
		if err != nil {
			return fmt.Errorf("journal %s: %w", path, err)
		}
		if n < len(data) {
			j.log.Warn("journal: dropped the torn tail of a write that never committed",
				zap.String("file", path), zap.Int("bytes", len(data)-n))
		}
		j.movingFiles = append(j.movingFiles, path)
	}
	if len(names) > 0 {
		j.moving = merged
		j.log.Info("journal read back", zap.Int("files", len(names)), zap.Int("records", len(merged)))
	}
	return nil
}

// readJournal calls apply for each write of a journal file's intact
// frames, in order, and returns how many bytes they span (with the magic).
// Values alias data.
func readJournal(data []byte, apply func(key string, value []byte)) (int, error) {
	if len(data) < len(journalMagic) {
		return 0, nil // a file whose creation a crash cut short
	}
	if string(data[:len(journalMagic)]) != journalMagic {
		return 0, errors.New("not a journal file of this version")
	}
	off := len(journalMagic)
	for len(data)-off >= frameHeader {
		n := int(binary.LittleEndian.Uint32(data[off:]))
		sum := binary.LittleEndian.Uint32(data[off+4:])
		// No commit is empty: a zero length is space a crash left
		// unwritten.
		if n == 0 || n > len(data)-off-frameHeader {
			break
		}
		payload := data[off+frameHeader : off+frameHeader+n]
		if crc32.Checksum(payload, castagnoli) != sum {
			break
		}
		if err := readFrame(payload, apply); err != nil {
			return off, fmt.Errorf("frame at byte %d: %w", off, err)
		}
		off += frameHeader + n
	}
	return off, nil
}

// readFrame calls apply for each write of one frame's payload.
func readFrame(p []byte, apply func(key string, value []byte)) error {
	for len(p) > 0 {
		op := p[0]
		key, rest, ok := cutField(p[1:])
		if !ok {
			return errors.New("truncated key")
		}
		switch op {
		case 'd':
			apply(string(key), nil)
		case 's':
			var value []byte
			if value, rest, ok = cutField(rest); !ok {
				return errors.New("truncated value")
			}
			apply(string(key), value)
		default:
			return fmt.Errorf("unknown op %q", op)
		}
		p = rest
	}
	return nil
}

// Appender is a record that encodes itself at the end of a buffer, as its
// MarshalJSON would return it: the journal encodes a commit's records
// straight into its frame instead of one allocation each.
type Appender interface {
	AppendJSON(b []byte) ([]byte, error)
}

// encodeFrame encodes writes as one frame in b's space and sets values[i]
// to writes[i]'s encoded value (nil for a deletion): Appenders' values lie
// in the frame itself, each capped at its end; other values are encoded
// on their own.
func encodeFrame(b []byte, writes []Write, values [][]byte) ([]byte, error) {
	b = append(b[:0], make([]byte, frameHeader)...)
	spans := make([][2]int, len(writes)) // Appenders' values in the frame
	for i, w := range writes {
		op := byte('s')
		if w.Value == nil {
			op = 'd'
		}
		b = appendField(append(b, op), w.Key)
		switch v := w.Value.(type) {
		case nil:
		case Appender:
			var from int
			var err error
			if b, from, err = appendValue(b, v); err != nil {
				return nil, fmt.Errorf("encoding %q: %w", w.Key, err)
			}
			spans[i] = [2]int{from, len(b)}
		default:
			enc, err := encode(v)
			if err != nil {
				return nil, fmt.Errorf("encoding %q: %w", w.Key, err)
			}
			if enc == nil {
				enc = []byte{} // nil is a deletion
			}
			values[i] = enc
			b = appendField(b, enc)
		}
	}
	for i, sp := range spans { // sliced once b stops moving
		if sp[1] != 0 {
			values[i] = b[sp[0]:sp[1]:sp[1]]
		}
	}
	payload := b[frameHeader:]
	binary.LittleEndian.PutUint32(b, uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[4:], crc32.Checksum(payload, castagnoli))
	return b, nil
}

// appendValue appends a's encoding as appendField would, and returns where
// the value starts. Its length goes first, so room for it is left before
// encoding: two bytes, the size of most records' (128 to 16383 bytes);
// another size moves the value.
func appendValue(b []byte, a Appender) ([]byte, int, error) {
	at := len(b)
	b, err := a.AppendJSON(append(b, 0, 0))
	if err != nil {
		return b, 0, err
	}
	n := len(b) - at - 2
	if w := uvarintLen(n); w != 2 {
		if w > 2 {
			b = append(b, make([]byte, w-2)...)
		}
		copy(b[at+w:], b[at+2:at+2+n])
		b = b[:at+w+n]
	}
	binary.PutUvarint(b[at:], uint64(n))
	return b, len(b) - n, nil
}

// uvarintLen is how many bytes binary.AppendUvarint writes for n.
func uvarintLen(n int) int { return (bits.Len64(uint64(n)|1) + 6) / 7 }

// Commit appends one frame and returns once it is written (and synced,
// with SyncWrites).
func (j *journal) Commit(writes []Write) error {
	if len(writes) == 0 {
		// Nothing to make durable; an empty frame would end the replay.
		return nil
	}
	j.running.Do(func() { go j.checkpointLoop() })
	j.commitMu.Lock()
	defer j.commitMu.Unlock()
	values := make([][]byte, len(writes))
	// The values stay in recent until the next checkpoint, and Appenders'
	// lie in the frame, so each commit's frame is new: sized by the last
	// commit's bytes per write, so that it rarely grows.
	frame, err := encodeFrame(make([]byte, 0, len(writes)*j.writeBytes+j.writeBytes/4), writes, values)
	if err != nil {
		return err
	}
	j.writeBytes = len(frame)/len(writes) + 1
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.torn {
		// The failed write may have left part of a frame at the end of
		// the file; a frame written after it would never be replayed.
		if err := j.rotate(); err != nil {
			return err
		}
		j.torn = false
	}
	if _, err := j.f.Write(frame); err != nil {
		j.torn = true
		return fmt.Errorf("writing the journal: %w", err)
	}
	if j.sync {
		if err := j.f.Sync(); err != nil {
			j.torn = true
			return fmt.Errorf("syncing the journal: %w", err)
		}
	}
	for i, w := range writes {
		j.recent[w.Key] = values[i]
	}
	j.size += int64(len(frame))
	if j.size >= checkpointBytes {
		select {
		case j.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

// rotate starts a new journal file. Callers hold mu.
func (j *journal) rotate() error {
	j.seq++
	name := filepath.Join(j.dir, fmt.Sprintf("%s%020d%s", journalPrefix, j.seq, journalSuffix))
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("creating a journal file: %w", err)
	}
	_, err = f.WriteString(journalMagic)
	if err == nil && j.sync {
		if err = f.Sync(); err == nil {
			err = SyncDir(j.dir)
		}
	}
	if err != nil {
		// The create failed with err, which is returned.
		_ = f.Close()
		_ = os.Remove(name)
		return fmt.Errorf("creating a journal file: %w", err)
	}
	if j.f != nil {
		_ = j.f.Close() // its writes went through write(2) already: a local file's close reports nothing more
	}
	j.f, j.size = f, int64(len(journalMagic))
	j.files = append(j.files, name)
	return nil
}

// SyncDir makes a directory's entries durable (a file created or renamed
// in it survives a power loss).
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// checkpointLoop checkpoints every checkpointEvery, or sooner when a file
// grew past checkpointBytes, until Close. After a failure it waits longer
// each time, up to maxCheckpointBackoff, whatever the journal's size: the
// journal keeps every write meanwhile, and a retry rewrites all of them.
func (j *journal) checkpointLoop() {
	defer close(j.done)
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	backoff := time.Duration(0)
	for {
		select {
		case <-j.stop:
			return
		case <-t.C:
		case <-j.kick:
		}
		err := j.checkpoint()
		if err == nil {
			backoff = 0
			continue
		}
		backoff = min(max(2*backoff, checkpointEvery), maxCheckpointBackoff)
		j.log.Error("moving the journal into the database failed; retrying", zap.Error(err), zap.Duration("backoff", backoff))
		select {
		case <-j.stop:
			return
		case <-time.After(backoff):
		}
	}
}

// checkpoint moves every write journaled so far into Badger and deletes
// the files that held them.
func (j *journal) checkpoint() error {
	j.ckMu.Lock()
	defer j.ckMu.Unlock()
	// An earlier checkpoint that failed goes first: its writes are older.
	if err := j.moveOut(); err != nil {
		return err
	}
	j.mu.Lock()
	if len(j.recent) == 0 {
		j.mu.Unlock()
		return nil
	}
	files := j.files
	j.files = nil
	if err := j.rotate(); err != nil {
		j.files = files
		j.mu.Unlock()
		return err
	}
	j.torn = false // the torn file is among those moved
	j.moving, j.movingFiles = j.recent, files
	j.recent = make(map[string][]byte, len(j.moving))
	j.mu.Unlock()
	return j.moveOut()
}

// moveOut writes moving into Badger, then deletes its files.
func (j *journal) moveOut() error {
	j.mu.Lock()
	moving, files, cs := j.moving, j.movingFiles, j.chunkers
	j.mu.Unlock()
	if moving == nil {
		return nil
	}
	if err := j.db.Commit(checkpointWrites(moving, cs, &j.db.exp)); err != nil {
		return err
	}
	j.mu.Lock()
	j.moving, j.movingFiles = nil, nil
	j.mu.Unlock()
	j.deleteMoved(files)
	return nil
}

// deleteMoved deletes files moved into Badger, oldest first. A file that
// cannot be deleted is kept with every file moved after it, and deleting
// them is retried at the next checkpoint: replayed at the next start
// without the later files, its values would replace the newer ones they
// moved into Badger. Callers hold ckMu.
func (j *journal) deleteMoved(files []string) {
	j.undeleted = append(j.undeleted, files...)
	for len(j.undeleted) > 0 {
		name := j.undeleted[0]
		if err := removeJournal(name); err != nil && !errors.Is(err, os.ErrNotExist) {
			// Replayed at the next start with the later files: harmless.
			j.log.Warn("journal: could not delete a moved file; keeping it and the later ones", zap.String("file", name), zap.Error(err))
			return
		}
		j.undeleted = j.undeleted[1:]
	}
}

// chunk makes the records under prefix chunked from the next checkpoint on.
func (j *journal) chunk(prefix string, slot func(key string) (string, bool)) {
	j.mu.Lock()
	j.chunkers = append(j.chunkers, chunker{prefix, slot})
	j.mu.Unlock()
}

// Get reads a journaled write not yet moved, else Badger: the record's
// own entry, else its slot's chunks.
func (j *journal) Get(key string, decode func(value []byte) error) error {
	j.mu.Lock()
	v, ok := j.recent[key]
	if !ok {
		v, ok = j.moving[key]
	}
	c := chunkerOf(j.chunkers, key)
	j.mu.Unlock()
	if !ok {
		err := j.db.Get(key, decode)
		if errors.Is(err, ErrNotFound) && c != nil {
			err = j.getChunked(c, key, decode)
		}
		return err
	}
	if v == nil {
		return ErrNotFound
	}
	return decode(v)
}

// Scan checkpoints first, so that Badger holds every write so far; the
// records of chunked kinds come after the others, slot by slot.
func (j *journal) Scan(prefix string, fn func(key, value []byte) (bool, error)) error {
	return j.ScanFrom(prefix, "", fn)
}

// ScanFrom is Scan without the chunks of slots before slot (SlotScanner).
func (j *journal) ScanFrom(prefix, slot string, fn func(key, value []byte) (bool, error)) error {
	if err := j.checkpoint(); err != nil {
		return err
	}
	j.mu.Lock()
	cs := j.chunkers
	j.mu.Unlock()
	more := true
	err := j.db.Scan(prefix, func(key, value []byte) (bool, error) {
		if bytes.HasPrefix(key, []byte(chunkPrefix)) {
			// Expanded below, by the kind's chunker: without one its
			// records would be skipped without a word.
			if chunkerOf(cs, string(key[len(chunkPrefix):])) == nil {
				return false, fmt.Errorf("the database holds records of a chunked kind the reader did not register (chunk %q)", key)
			}
			return true, nil
		}
		if bytes.HasPrefix(key, []byte(deletedPrefix)) {
			return true, nil // the deletion log's, not a record
		}
		var err error
		more, err = fn(key, value)
		return more, err
	})
	for i := range cs {
		if err != nil || !more {
			break
		}
		if strings.HasPrefix(cs[i].prefix, prefix) || strings.HasPrefix(prefix, cs[i].prefix) {
			more, err = j.scanChunked(&cs[i], prefix, slot, fn)
		}
	}
	return err
}

// stopCheckpoints ends the checkpoint loop, if the first commit started
// it, and waits for it.
func (j *journal) stopCheckpoints() {
	close(j.stop)
	started := true
	j.running.Do(func() { started = false })
	if started {
		<-j.done
	}
}

// crash closes the journal as a killed process leaves it (Kernel.Crash):
// no checkpoint, its files as they are; Badger keeps what it committed.
func (j *journal) crash() error {
	j.stopCheckpoints()
	j.ckMu.Lock() // a checkpoint under way finishes first
	defer j.ckMu.Unlock()
	j.mu.Lock()
	if j.f != nil {
		_ = j.f.Close() // a crash: the file is left as a killed process leaves it
		j.f = nil
	}
	j.mu.Unlock()
	return j.db.Close()
}

// Close moves the journal into Badger and closes both. If that last
// checkpoint fails, the files stay and the next Open replays them.
func (j *journal) Close() error {
	j.stopCheckpoints()
	err := j.checkpoint()
	j.mu.Lock()
	if j.f != nil {
		_ = j.f.Close() // its writes were synced or checkpointed: the checkpoint's err decides
		if err == nil && len(j.recent) == 0 && j.moving == nil {
			_ = os.Remove(j.f.Name()) // holds no write
			j.closed = j.db.db.MaxVersion()
		}
		j.f = nil
	}
	j.mu.Unlock()
	if cerr := j.db.Close(); err == nil {
		err = cerr
	}
	return err
}
