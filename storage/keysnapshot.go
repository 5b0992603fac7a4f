package storage

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
)

// The key table's snapshot lets a restart skip reading and decoding every
// key record (at a million keys, most of the start's 11 s): a clean close
// writes the table to one file with the database version it matches, and
// the next open restores it when the database opened on that same
// version, with no journal to replay. Any other case (a crash, a snapshot
// from another build or version, a damaged file) loads the records as
// before. The file is removed once read, so that it never outlives the
// version it was written for.

const (
	keySnapshotFile  = "keytable.snapshot"
	keySnapshotMagic = "tollgate key table v1\n"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// The slots are stored as they are in memory; the header's fields are
// little-endian, and so must the host be for the two to agree.
var errByteOrder = errors.New("the key table snapshot needs a little-endian host")

func littleEndian() bool { return binary.NativeEndian.Uint16([]byte{1, 0}) == 1 }

// keySnapshotHeader follows the magic; slotSize guards against a build
// whose slots are laid out differently.
type keySnapshotHeader struct {
	Version  uint64 // the backend's version (kernel.Versioned)
	Seq      uint64 // the highest key Seq
	SlotSize uint64
	Slots    uint64
	Free     uint64
	Cold     uint64
	Dead     uint64
	Strs     uint64
	Ctrs     uint64
	CtrFree  uint64
}

// writeKeySnapshot writes the table to dir for the database at version,
// through a temporary file renamed into place.
func writeKeySnapshot(dir string, version uint64, t *keyTable) error {
	if !littleEndian() {
		return errByteOrder
	}
	tmp, err := os.CreateTemp(dir, keySnapshotFile+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // after the rename: nothing
	crc := crc32.New(crcTable)
	w := bufio.NewWriterSize(io.MultiWriter(tmp, crc), 1<<20)
	var seq uint64
	for i := range t.slots {
		seq = max(seq, t.slots[i].seq)
	}
	h := keySnapshotHeader{
		Version: version, Seq: seq, SlotSize: uint64(unsafe.Sizeof(keySlot{})),
		Slots: uint64(len(t.slots)), Free: uint64(len(t.free)), Cold: uint64(len(t.cold)),
		Dead: uint64(t.dead), Strs: uint64(len(t.strs.list)),
		Ctrs: uint64(len(t.ctrs)), CtrFree: uint64(len(t.ctrFree)),
	}
	_, _ = w.WriteString(keySnapshotMagic)
	_ = binary.Write(w, binary.LittleEndian, h)
	_, _ = w.Write(sliceBytes(t.slots))
	_, _ = w.Write(sliceBytes(t.free))
	_, _ = w.Write(t.cold)
	_, _ = w.Write(sliceBytes(t.ctrs))
	_, _ = w.Write(sliceBytes(t.ctrFree))
	var n [binary.MaxVarintLen64]byte
	for _, s := range t.strs.list {
		_, _ = w.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		_, _ = w.WriteString(s)
	}
	if err := w.Flush(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := binary.Write(tmp, binary.LittleEndian, crc.Sum32()); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, keySnapshotFile))
}

// errStaleSnapshot: the snapshot is for another version of the database.
var errStaleSnapshot = errors.New("the key table snapshot is for another database version")

// readKeySnapshot restores the table from dir's snapshot if it was written
// for version, and removes the file in any case; it returns the highest
// key Seq. os.ErrNotExist when there is none. It reads the file straight
// into the table's slices.
func readKeySnapshot(dir string, version uint64, t *keyTable) (uint64, error) {
	path := filepath.Join(dir, keySnapshotFile)
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := os.Remove(path); err != nil {
		return 0, err
	}
	if !littleEndian() {
		return 0, errByteOrder
	}
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := fi.Size()
	crc := crc32.New(crcTable)
	r := bufio.NewReaderSize(io.TeeReader(io.LimitReader(f, max(size-4, 0)), crc), 1<<20)
	damaged := errors.New("the key table snapshot is damaged or truncated")
	magic := make([]byte, len(keySnapshotMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != keySnapshotMagic {
		return 0, damaged
	}
	var h keySnapshotHeader
	if err := binary.Read(r, binary.LittleEndian, &h); err != nil {
		return 0, damaged
	}
	if h.Version != version {
		return 0, errStaleSnapshot
	}
	if h.SlotSize != uint64(unsafe.Sizeof(keySlot{})) {
		return 0, fmt.Errorf("the key table snapshot has slots of %d bytes, this build %d", h.SlotSize, unsafe.Sizeof(keySlot{}))
	}
	body := uint64(len(keySnapshotMagic)) + uint64(unsafe.Sizeof(h)) + h.Slots*h.SlotSize + 4*h.Free + h.Cold +
		uint64(unsafe.Sizeof(keyCounters{}))*h.Ctrs + 4*h.CtrFree
	for _, n := range []uint64{h.Slots, h.Free, h.Cold, h.Ctrs, h.CtrFree, h.Strs} {
		if n > uint64(size) {
			return 0, damaged
		}
	}
	if body > uint64(size-4) || h.Strs == 0 {
		return 0, damaged
	}
	var nt keyTable
	nt.reset()
	nt.slots = make([]keySlot, h.Slots)
	nt.free = make([]uint32, h.Free)
	nt.cold = make([]byte, h.Cold)
	nt.ctrs = make([]keyCounters, h.Ctrs)
	nt.ctrFree = make([]uint32, h.CtrFree)
	for _, b := range [][]byte{sliceBytes(nt.slots), sliceBytes(nt.free), nt.cold, sliceBytes(nt.ctrs), sliceBytes(nt.ctrFree)} {
		if _, err := io.ReadFull(r, b); err != nil {
			return 0, damaged
		}
	}
	nt.dead = int(h.Dead)
	nt.strs.list = make([]string, 0, min(h.Strs, uint64(size)))
	nt.strs.ids = make(map[string]uint32, min(h.Strs, uint64(size)))
	var buf []byte
	for range h.Strs {
		n, err := binary.ReadUvarint(r)
		if err != nil || n > uint64(size) {
			return 0, damaged
		}
		buf = slices.Grow(buf[:0], int(n))[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return 0, damaged
		}
		s := string(buf)
		nt.strs.ids[s] = uint32(len(nt.strs.list))
		nt.strs.list = append(nt.strs.list, s)
	}
	if n, _ := io.Copy(io.Discard, r); n != 0 || nt.strs.list[0] != "" {
		return 0, damaged
	}
	var sum [4]byte
	if _, err := io.ReadFull(f, sum[:]); err != nil || binary.LittleEndian.Uint32(sum[:]) != crc.Sum32() {
		return 0, errors.New("the key table snapshot fails its checksum")
	}
	if err := nt.check(); err != nil {
		return 0, err
	}
	for i := range nt.slots {
		if nt.slots[i].flags&slotLive != 0 {
			nt.live++
		}
	}
	n := 64
	for 4*nt.live > 3*n {
		n *= 2
	}
	nt.rebuildIndex(n)
	*t = nt
	return h.Seq, nil
}

// check verifies that a restored table's references stay in bounds.
func (t *keyTable) check() error {
	strs := uint32(len(t.strs.list))
	for i := range t.slots {
		sl := &t.slots[i]
		if sl.flags&slotLive == 0 {
			continue
		}
		if sl.account >= strs || sl.workspace >= strs || sl.creator >= strs || sl.reset >= strs ||
			uint64(sl.coldAt)+uint64(sl.coldLen) > uint64(len(t.cold)) || int(sl.ctr) > len(t.ctrs) {
			return fmt.Errorf("the key table snapshot's slot %d is damaged", i)
		}
	}
	for _, f := range t.free {
		if f >= uint32(len(t.slots)) || t.slots[f].flags&slotLive != 0 {
			return errors.New("the key table snapshot's free list is damaged")
		}
	}
	for _, f := range t.ctrFree {
		if f >= uint32(len(t.ctrs)) {
			return errors.New("the key table snapshot's free counters are damaged")
		}
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
