package codec

import "unsafe"

// StrArena copies the small strings a start decodes from the snapshots
// into shared blocks. At a million keys a start decodes about 1.7 million
// strings (ids, names, hashes); as objects of their own, each is marked by
// every garbage collection for as long as the gateway runs (there, one
// full collection took 158 ms of CPU with them and 133 in blocks). A
// block lives while any of its strings does, so blocks are small: what a
// replaced record's strings keep alive is a block at most. A nil arena
// copies each string into its own object.
type StrArena struct{ block []byte }

const (
	arenaBlock = 32 << 10
	arenaMax   = 1 << 10 // longer strings get their own object
)

// Str returns b's bytes as a string that never changes: the block's bytes
// it uses are never written again.
func (a *StrArena) Str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if a == nil || len(b) > arenaMax {
		return string(b)
	}
	if cap(a.block)-len(a.block) < len(b) {
		a.block = make([]byte, 0, arenaBlock)
	}
	at := len(a.block)
	a.block = append(a.block, b...)
	return unsafe.String(&a.block[at], len(b))
}
