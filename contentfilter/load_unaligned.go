//go:build 386 || amd64 || arm64 || ppc64le

package contentfilter

import "unsafe"

// load64 is s[i:i+8] as a little-endian word: one unaligned load, on
// the little-endian machines that make it cheap. Its callers, the scans'
// inner loops, test i+8 <= len(s) before (the bounds check each load
// would add costs as much as the load's use).
func load64(s string, i int) uint64 {
	return *(*uint64)(unsafe.Add(unsafe.Pointer(unsafe.StringData(s)), i))
}
