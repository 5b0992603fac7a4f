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
}

// writeKeySnapshot writes the table to dir for the database at version,
// through a temporary file renamed into place.
func writeKeySnapshot(dir string, version uint64, t *keyTable) error {
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
	}
	_, _ = w.WriteString(keySnapshotMagic)
	_ = binary.Write(w, binary.LittleEndian, h)
	_, _ = w.Write(sliceBytes(t.slots))
	_, _ = w.Write(sliceBytes(t.free))
	_, _ = w.Write(t.cold)
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
// key Seq. os.ErrNotExist when there is none.
func readKeySnapshot(dir string, version uint64, t *keyTable) (uint64, error) {
	path := filepath.Join(dir, keySnapshotFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	if err := os.Remove(path); err != nil {
		return 0, err
	}
	const hdr = len(keySnapshotMagic) + int(unsafe.Sizeof(keySnapshotHeader{}))
	if len(data) < hdr+4 || string(data[:len(keySnapshotMagic)]) != keySnapshotMagic {
		return 0, errors.New("the key table snapshot is damaged")
	}
	body := data[:len(data)-4]
	if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(data[len(data)-4:]) {
		return 0, errors.New("the key table snapshot fails its checksum")
	}
	var h keySnapshotHeader
	if _, err := binary.Decode(data[len(keySnapshotMagic):hdr], binary.LittleEndian, &h); err != nil {
		return 0, err
	}
	if h.Version != version {
		return 0, errStaleSnapshot
	}
	if h.SlotSize != uint64(unsafe.Sizeof(keySlot{})) {
		return 0, fmt.Errorf("the key table snapshot has slots of %d bytes, this build %d", h.SlotSize, unsafe.Sizeof(keySlot{}))
	}
	r := body[hdr:]
	take := func(n uint64) ([]byte, bool) {
		if n > uint64(len(r)) {
			return nil, false
		}
		b := r[:n]
		r = r[n:]
		return b, true
	}
	slotBytes, ok1 := take(h.Slots * h.SlotSize)
	freeBytes, ok2 := take(h.Free * 4)
	cold, ok3 := take(h.Cold)
	if !ok1 || !ok2 || !ok3 {
		return 0, errors.New("the key table snapshot is truncated")
	}
	var nt keyTable
	nt.reset()
	nt.slots = make([]keySlot, h.Slots)
	copy(sliceBytes(nt.slots), slotBytes)
	nt.free = make([]uint32, h.Free)
	copy(sliceBytes(nt.free), freeBytes)
	nt.cold = append([]byte(nil), cold...)
	nt.dead = int(h.Dead)
	nt.strs.list = make([]string, 0, h.Strs)
	nt.strs.ids = make(map[string]uint32, h.Strs)
	for range h.Strs {
		n, w := binary.Uvarint(r)
		if w <= 0 || n > uint64(len(r)-w) {
			return 0, errors.New("the key table snapshot is truncated")
		}
		s := string(r[w : w+int(n)])
		r = r[w+int(n):]
		nt.strs.ids[s] = uint32(len(nt.strs.list))
		nt.strs.list = append(nt.strs.list, s)
	}
	if len(r) != 0 || len(nt.strs.list) == 0 || nt.strs.list[0] != "" {
		return 0, errors.New("the key table snapshot is damaged")
	}
	if err := nt.check(); err != nil {
		return 0, err
	}
	nt.live = 0
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
			uint64(sl.coldAt)+uint64(sl.coldLen) > uint64(len(t.cold)) {
			return fmt.Errorf("the key table snapshot's slot %d is damaged", i)
		}
	}
	for _, f := range t.free {
		if f >= uint32(len(t.slots)) || t.slots[f].flags&slotLive != 0 {
			return errors.New("the key table snapshot's free list is damaged")
		}
	}
	return nil
}

// sliceBytes views a slice of pointer-free values as its bytes.
func sliceBytes[T keySlot | uint32](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}
