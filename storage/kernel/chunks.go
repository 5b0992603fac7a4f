package kernel

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// A checkpoint writes the records of a kind with a Slot (generations: one
// per request, immutable) as chunks: one Badger entry per slot and
// checkpoint, holding every record of that slot the checkpoint moved,
// under chunkPrefix + the kind's prefix + slot + "/" + a suffix unique to
// the checkpoint. One entry per record cost Badger's per-entry work (two
// encodings, a skiplist insert, the memtable's flush and compactions) on
// every request: with the journal, most of the storage's remaining CPU.
// A record is read back from its slot's chunks (a lookup reads the few
// chunks of one slot), or from its own entry: records of a kind without a
// Slot, records whose key has no slot, and records replayed from the
// journal at startup, before the kinds are registered.
//
// A chunk is a sequence of key and value, each as a uvarint length and the
// bytes. A crash after a checkpoint's Badger commit and before its journal
// files are deleted replays those records into a second copy; readers
// therefore skip a key already read from the same slot.

// chunkPrefix starts every chunk's key; no kind's prefix may start with '~'.
const chunkPrefix = "~c/"

// chunker is a kind whose records are chunked.
type chunker struct {
	prefix string
	slot   func(key string) (string, bool)
}

// chunkerOf returns the chunker whose kind key belongs to, or nil.
func chunkerOf(cs []chunker, key string) *chunker {
	for i := range cs {
		if strings.HasPrefix(key, cs[i].prefix) {
			return &cs[i]
		}
	}
	return nil
}

// chunkSuffix is unique to one checkpoint: its time, so that a slot's
// chunks list in the order they were written, and randomness against two
// checkpoints in one clock tick.
func chunkSuffix() string {
	var r [6]byte
	_, _ = rand.Read(r[:]) // never fails (crypto/rand panics instead)
	return fmt.Sprintf("%020d-%x", time.Now().UnixNano(), r)
}

// checkpointWrites turns journaled writes into Badger's: the records of
// chunked kinds grouped into one chunk per slot, the others as they are.
// A chunk expires with the last of its records to expire (exp), never
// before any of them.
func checkpointWrites(m map[string][]byte, cs []chunker, exp *expiries) []Write {
	type group struct {
		c    *chunker
		slot string // a substring of the records' keys: no copy per record
	}
	writes := make([]Write, 0, len(m))
	groups := map[group]*[]string{} // a pointer: one map access per record
	for key, v := range m {
		if v != nil {
			if c := chunkerOf(cs, key); c != nil {
				if slot, ok := c.slot(key); ok && !strings.Contains(slot, "/") {
					g := group{c, slot}
					keys := groups[g]
					if keys == nil {
						keys = new([]string)
						groups[g] = keys
					}
					*keys = append(*keys, key)
					continue
				}
			}
		}
		w := Write{Key: key}
		if v != nil {
			w.Value = rawValue(v)
		}
		writes = append(writes, w)
	}
	if len(groups) == 0 {
		return writes
	}
	suffix := chunkSuffix()
	var values [][]byte
	for g, keys := range groups {
		slices.Sort(*keys)
		values = values[:0]
		size := 0
		for _, k := range *keys {
			v := m[k]
			values = append(values, v)
			size += 2*binary.MaxVarintLen32 + len(k) + len(v)
		}
		b := make([]byte, 0, size)
		var expires int64
		for i, k := range *keys {
			b = appendField(appendField(b, k), values[i])
			if expires >= 0 {
				if at := exp.at(k, values[i]); at > 0 {
					expires = max(expires, at)
				} else {
					expires = -1 // one record never expires: nor does the chunk
				}
			}
		}
		writes = append(writes, Write{Key: chunkPrefix + g.c.prefix + g.slot + "/" + suffix, Value: rawValue(b), ExpiresAt: max(expires, 0)})
	}
	return writes
}

var errBadChunk = errors.New("kernel: malformed chunk")

// eachChunkRecord calls fn for each record of a chunk until fn returns
// false or an error; it reports whether fn always asked for more.
func eachChunkRecord(c []byte, fn func(key, value []byte) (bool, error)) (bool, error) {
	for len(c) > 0 {
		key, rest, ok := cutField(c)
		if !ok {
			return false, errBadChunk
		}
		value, rest, ok := cutField(rest)
		if !ok {
			return false, errBadChunk
		}
		c = rest
		if more, err := fn(key, value); !more || err != nil {
			return false, err
		}
	}
	return true, nil
}

// appendField appends f as cutField reads it back: its length as a uvarint,
// then its bytes (the journal's frames and the chunks store keys and values
// so).
func appendField[F string | []byte](b []byte, f F) []byte {
	return append(binary.AppendUvarint(b, uint64(len(f))), f...)
}

// cutField reads a uvarint length and that many bytes off the front of b,
// as appendField wrote them.
func cutField(b []byte) (field, rest []byte, ok bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return nil, b, false
	}
	return b[w : w+int(n)], b[w+int(n):], true
}

// getChunked finds key in its slot's chunks.
func (j *journal) getChunked(c *chunker, key string, decode func(value []byte) error) error {
	slot, ok := c.slot(key)
	if !ok {
		return ErrNotFound
	}
	found := false
	err := j.db.Scan(chunkPrefix+c.prefix+slot+"/", func(_, v []byte) (bool, error) {
		return eachChunkRecord(v, func(k, value []byte) (bool, error) {
			if string(k) != key {
				return true, nil
			}
			found = true
			return false, decode(value)
		})
	})
	if err == nil && !found {
		err = ErrNotFound
	}
	return err
}

// scanChunked calls fn for each chunked record of c's kind whose key starts
// with prefix, slot by slot, each once; it reports whether fn always asked
// for more.
func (j *journal) scanChunked(c *chunker, prefix, fromSlot string, fn func(key, value []byte) (bool, error)) (bool, error) {
	from := chunkPrefix + c.prefix
	seen := map[string]struct{}{}
	var slot []byte
	more := true
	err := j.db.scanFrom(from, from+fromSlot, func(ck, v []byte) (bool, error) {
		s := ck[len(from):]
		if i := bytes.LastIndexByte(s, '/'); i >= 0 {
			s = s[:i]
		}
		if !bytes.Equal(s, slot) {
			clear(seen)
			slot = append(slot[:0], s...)
		}
		var err error
		more, err = eachChunkRecord(v, func(k, value []byte) (bool, error) {
			if !bytes.HasPrefix(k, []byte(prefix)) {
				return true, nil
			}
			if _, dup := seen[string(k)]; dup {
				return true, nil
			}
			seen[string(k)] = struct{}{}
			return fn(k, value)
		})
		return more, err
	})
	return more, err
}
