package keytable

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"unsafe"

	"github.com/tollgate-dev/caddy-tollgate/storage/codec"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
)

// The key table's snapshot lets a start skip reading and decoding every
// key record (at a million keys, most of a start's time): the table is
// written to one file with the database version V it reflects, at a clean
// close and every minute while keys change (the store's keySnapshotEvery).
// A start restores it,
// then the store brings it up to date from what changed since: the
// key records written after V (a walk of the versions after V, which
// skips Badger's older tables whole), those the snapshot marks as
// changed while it was taken, and the keys deleted after V, which the
// kernel's deletion log names (a tombstone may be compacted away). After
// a clean close the database is still at V and nothing is read.
//
// Why that is exact: memory is the truth for keys, and a key record that
// is neither dirty nor being committed holds in memory what the journal
// or Badger holds (kernel.Tracker). The snapshot is taken in steps; the
// keys changed meanwhile (tracked) are written as such and read back from
// the database. Every other key's durable value is the same all along
// the snapshot, so its latest version in the database is either at most
// V, and then that value is the snapshot's, or it was written (or
// deleted) later (a checkpoint after V, a change after the snapshot, or
// the journal the start replays after a crash, which is moved into
// Badger first, at new versions), and then it is read (or dropped). A
// deletion at most V is already the snapshot's: its entry in the
// deletion log is ignored, and dropped once the snapshot is durably in
// place. A damaged file, another build's layout, or a database older than
// V loads every record as before.

// v3: written by a build that logs deletions. A v2 file's catch-up by
// this build would miss the deletions its own build made after it,
// which left no entry in the log: it is another layout, all read.
// v5: a key's cold part carries its rate limits.
const (
	SnapshotFile     = "keytable.snapshot"
	keySnapshotMagic = "tollgate key table v5\n"
)

// DefaultChunk is how many slots (or counters) one step of a snapshot
// copies under the lock: about 1.5 MB, a fraction of a millisecond.
const DefaultChunk = 16 << 10

// Snapshots writes the table's snapshots of a store's database.
type Snapshots struct {
	Dir    string
	Kernel *kernel.Kernel
	// Prefix keys the key records (the kernel tracks their changes).
	Prefix string
	// Chunk is how many slots one step copies (0: DefaultChunk); Step,
	// when set, runs between steps (tests change keys there).
	Chunk int
	Step  func()
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// The slots are stored as they are in memory; the header's fields are
// little-endian, and so must the host be for the two to agree.
var errByteOrder = errors.New("the key table snapshot needs a little-endian host")

func littleEndian() bool { return binary.NativeEndian.Uint16([]byte{1, 0}) == 1 }

// keySnapshotHeader follows the magic; SlotSize guards against a build
// whose slots are laid out differently. The body follows: the slots, the
// counters, the arena, the interned strings and the changed keys' hashes
// (each length-prefixed), whose CRC-32C is BodyCRC. The file ends with
// the CRC-32C of the magic and header.
type keySnapshotHeader struct {
	Version  uint64 // the backend's version (kernel.Versioned)
	Seq      uint64 // the highest key Seq
	SlotSize uint64
	Slots    uint64
	Ctrs     uint64
	Cold     uint64
	Strs     uint64
	Changed  uint64 // keys changed while the snapshot was taken
	BodyCRC  uint64
}

// errSnapshotVoid: the table changed under the snapshot in a way it
// cannot track (a new arena); the next one is taken later.
var errSnapshotVoid = errors.New("the key table changed its arena while its snapshot was taken")

// Write writes the table to o.Dir for the database at version v
// (a version read before it began), through a temporary file renamed into
// place, taking the kernel's lock only to copy a step's slots or counters.
// Keys changed meanwhile are listed as changed. sync: make the database
// durable on disk before the file is in place (the snapshot must never be
// ahead of it after a power loss), and once the file is in place drop
// the deletion log's entries it makes redundant (kernel.ForgetDeletions; a
// clean close, the database closed, leaves them to the next snapshot).
func (o Snapshots) Write(t *Table, v uint64, sync bool) error {
	dir, k, chunk := o.Dir, o.Kernel, o.Chunk
	if chunk <= 0 {
		chunk = DefaultChunk
	}
	if !littleEndian() {
		return errByteOrder
	}
	tmp, err := os.CreateTemp(dir, SnapshotFile+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // after the rename: nothing
	fail := func(err error) error { _ = tmp.Close(); return err }
	var h keySnapshotHeader
	hdrLen := int64(len(keySnapshotMagic)) + int64(unsafe.Sizeof(h))
	if _, err := tmp.Seek(hdrLen, io.SeekStart); err != nil {
		return fail(err)
	}
	crc := crc32.New(crcTable)
	w := bufio.NewWriterSize(io.MultiWriter(tmp, crc), 1<<20)

	k.Lock()
	tr := k.Track(o.Prefix, true)
	gen, slots, ctrs := t.gen, len(t.slots), len(t.ctrs)
	k.Unlock()
	abort := func(err error) error {
		k.Lock()
		k.EndTrack(tr)
		k.Unlock()
		return fail(err)
	}
	// Keys that exist now are in slots[:slots] with counters in
	// ctrs[:ctrs]; a later slot or counter belongs to a key created since,
	// which is tracked.
	buf := make([]keySlot, chunk)
	for at := 0; at < slots; at += chunk {
		n := min(chunk, slots-at)
		k.Lock()
		if t.gen != gen {
			k.Unlock()
			return abort(errSnapshotVoid)
		}
		copy(buf, t.slots[at:at+n])
		k.Unlock()
		if o.Step != nil {
			o.Step()
		}
		for i := range buf[:n] {
			h.Seq = max(h.Seq, buf[i].seq)
		}
		// w is buffered and keeps its first error: Flush reports it.
		_, _ = w.Write(sliceBytes(buf[:n]))
	}
	cbuf := make([]keyCounters, chunk)
	for at := 0; at < ctrs; at += chunk {
		n := min(chunk, ctrs-at)
		k.Lock()
		copy(cbuf, t.ctrs[at:at+n])
		k.Unlock()
		_, _ = w.Write(sliceBytes(cbuf[:n]))
	}
	k.Lock()
	k.EndTrack(tr)
	// The arena's bytes and the interned strings up to their length never
	// change: their headers now cover every slot copied above.
	same, cold, strs := t.gen == gen, t.cold, t.strs.list
	k.Unlock()
	if !same {
		return fail(errSnapshotVoid)
	}
	// w keeps its first error, which Flush below reports.
	_, _ = w.Write(cold)
	var nb [binary.MaxVarintLen64]byte
	for _, s := range strs {
		_, _ = w.Write(nb[:binary.PutUvarint(nb[:], uint64(len(s)))])
		_, _ = w.WriteString(s)
	}
	for key := range tr.Keys() {
		hash := key[len(o.Prefix):]
		_, _ = w.Write(nb[:binary.PutUvarint(nb[:], uint64(len(hash)))])
		_, _ = w.WriteString(hash)
	}
	if err := w.Flush(); err != nil {
		return fail(err)
	}
	h.Version, h.SlotSize = v, uint64(unsafe.Sizeof(keySlot{}))
	h.Slots, h.Ctrs, h.Cold = uint64(slots), uint64(ctrs), uint64(len(cold))
	h.Strs, h.Changed, h.BodyCRC = uint64(len(strs)), uint64(len(tr.Keys())), uint64(crc.Sum32())
	hdr := append(make([]byte, 0, hdrLen), keySnapshotMagic...)
	hdr, _ = binary.Append(hdr, binary.LittleEndian, h)
	if _, err := tmp.WriteAt(hdr, 0); err != nil {
		return fail(err)
	}
	if err := binary.Write(tmp, binary.LittleEndian, crc32.Checksum(hdr, crcTable)); err != nil {
		return fail(err)
	}
	if err := k.PutInPlace(tmp, dir, SnapshotFile, sync); err != nil || !sync {
		return err
	}
	_, err = k.ForgetDeletions(o.Prefix, v)
	return err
}

// Restored is what Read restored: the version the table
// reflects, the highest Seq, and the keys it does not hold because they
// changed while the snapshot was taken (their ids, and their hashes), to
// be read from the database.
type Restored struct {
	Version       uint64
	Seq           uint64
	Changed       map[[32]byte]struct{}
	ChangedHashes []string
}

// Read restores the table from dir's snapshot into t. The file
// stays: it remains right for the database (what changed after it is
// newer there). os.ErrNotExist when there is none.
func Read(dir string, t *Table) (Restored, error) {
	var r Restored
	f, err := os.Open(filepath.Join(dir, SnapshotFile))
	if err != nil {
		return r, err
	}
	defer f.Close()
	if !littleEndian() {
		return r, errByteOrder
	}
	fi, err := f.Stat()
	if err != nil {
		return r, err
	}
	size := uint64(fi.Size())
	damaged := errors.New("the key table snapshot is damaged or truncated")
	var h keySnapshotHeader
	hdr := make([]byte, len(keySnapshotMagic)+int(unsafe.Sizeof(h)))
	var sum [4]byte
	if size < uint64(len(hdr))+4 {
		return r, damaged
	}
	if _, err := f.ReadAt(sum[:], int64(size)-4); err != nil {
		return r, damaged
	}
	if _, err := io.ReadFull(f, hdr); err != nil || string(hdr[:len(keySnapshotMagic)]) != keySnapshotMagic {
		return r, damaged
	}
	if binary.LittleEndian.Uint32(sum[:]) != crc32.Checksum(hdr, crcTable) {
		return r, errors.New("the key table snapshot's header fails its checksum")
	}
	if _, err := binary.Decode(hdr[len(keySnapshotMagic):], binary.LittleEndian, &h); err != nil {
		return r, damaged
	}
	if h.SlotSize != uint64(unsafe.Sizeof(keySlot{})) {
		return r, fmt.Errorf("the key table snapshot has slots of %d bytes, this build %d", h.SlotSize, unsafe.Sizeof(keySlot{}))
	}
	for _, n := range []uint64{h.Slots, h.Ctrs, h.Cold, h.Strs, h.Changed} {
		if n > size {
			return r, damaged
		}
	}
	if h.Strs == 0 || uint64(len(hdr))+h.Slots*h.SlotSize+uint64(unsafe.Sizeof(keyCounters{}))*h.Ctrs+h.Cold > size {
		return r, damaged
	}
	crc := crc32.New(crcTable)
	br := bufio.NewReaderSize(io.TeeReader(io.LimitReader(f, int64(size)-int64(len(hdr))-4), crc), 1<<20)
	var nt Table
	nt.Reset()
	nt.slots = make([]keySlot, h.Slots)
	nt.ctrs = make([]keyCounters, h.Ctrs)
	nt.cold = make([]byte, h.Cold)
	for _, b := range [][]byte{sliceBytes(nt.slots), sliceBytes(nt.ctrs), nt.cold} {
		if _, err := io.ReadFull(br, b); err != nil {
			return r, damaged
		}
	}
	var buf []byte
	var strs codec.StrArena
	str := func(strs *codec.StrArena) (string, bool) {
		n, err := binary.ReadUvarint(br)
		if err != nil || n > size {
			return "", false
		}
		buf = slices.Grow(buf[:0], int(n))[:n]
		if _, err := io.ReadFull(br, buf); err != nil {
			return "", false
		}
		return strs.Str(buf), true
	}
	nt.strs.list = make([]string, 0, h.Strs)
	nt.strs.ids = make(map[string]uint32, h.Strs)
	for range h.Strs {
		s, ok := str(&strs)
		if !ok {
			return r, damaged
		}
		nt.strs.ids[s] = uint32(len(nt.strs.list))
		nt.strs.list = append(nt.strs.list, s)
	}
	r.Changed = make(map[[32]byte]struct{}, h.Changed)
	for range h.Changed {
		hash, ok := str(nil)
		if !ok {
			return r, damaged
		}
		id, _ := keyID(hash)
		r.Changed[id] = struct{}{}
		r.ChangedHashes = append(r.ChangedHashes, hash)
	}
	if n, _ := io.Copy(io.Discard, br); n != 0 || nt.strs.list[0] != "" {
		return r, damaged
	}
	if uint64(crc.Sum32()) != h.BodyCRC {
		return r, errors.New("the key table snapshot fails its checksum")
	}
	if err := nt.restore(r.Changed); err != nil {
		return r, err
	}
	*t = nt
	r.Version, r.Seq = h.Version, h.Seq
	return r, nil
}

// restore makes a table read from a snapshot whole: it empties the slots
// of changed keys (copied at any point of the snapshot, they may even
// hold a slot twice), checks that every other slot's references stay in
// bounds, and rebuilds what the file does not hold: the free lists, the
// count of live keys and dead arena bytes, the index.
func (t *Table) restore(changed map[[32]byte]struct{}) error {
	strs := uint32(len(t.strs.list))
	used := make([]bool, len(t.ctrs))
	coldLive := 0
	for i := range t.slots {
		sl := &t.slots[i]
		if sl.flags&slotLive == 0 {
			*sl = keySlot{}
			continue
		}
		if _, ok := changed[sl.id]; len(changed) > 0 && ok {
			*sl = keySlot{}
			continue
		}
		if sl.account >= strs || sl.workspace >= strs || sl.creator >= strs || sl.reset >= strs ||
			uint64(sl.coldAt)+uint64(sl.coldLen) > uint64(len(t.cold)) || int(sl.ctr) > len(t.ctrs) {
			return fmt.Errorf("the key table snapshot's slot %d is damaged", i)
		}
		if sl.ctr != 0 {
			if used[sl.ctr-1] {
				return fmt.Errorf("the key table snapshot's slot %d shares its counters", i)
			}
			used[sl.ctr-1] = true
		}
		t.live++
		coldLive += int(sl.coldLen)
	}
	t.free = t.free[:0]
	for i := len(t.slots) - 1; i >= 0; i-- { // reused from the end: lowest first
		if t.slots[i].flags&slotLive == 0 {
			t.free = append(t.free, uint32(i))
		}
	}
	t.ctrFree = t.ctrFree[:0]
	for i := len(t.ctrs) - 1; i >= 0; i-- {
		if !used[i] {
			t.ctrs[i] = keyCounters{}
			t.ctrFree = append(t.ctrFree, uint32(i))
		}
	}
	t.dead = len(t.cold) - coldLive
	n := 64
	for 4*t.live > 3*n {
		n *= 2
	}
	// rebuildIndex, checking that no two slots hold one key.
	t.index = make([]uint32, n)
	for s := range t.slots {
		sl := &t.slots[s]
		if sl.flags&slotLive == 0 {
			continue
		}
		_, at, dup := t.find(&sl.id)
		if dup {
			return fmt.Errorf("the key table snapshot holds a key twice (slot %d)", s)
		}
		t.index[at] = uint32(s) + 1
	}
	return nil
}

// sliceBytes views a slice of pointer-free values as its bytes.
func sliceBytes[T keySlot | keyCounters | uint32](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}
