package billing

import "math/bits"

// divide is bits.Div64 for a dividend known to fit (hi < c).
func divide(hi, lo, c uint64) (q, r uint64) { return bits.Div64(hi, lo, c) }
