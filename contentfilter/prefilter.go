package contentfilter

import (
	"math/bits"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode/utf8"
)

// A custom pattern's prefilter: strings one of which every match of the
// pattern contains, lowercased (ASCII), so that a text whose lowercased
// copy contains none of them cannot match and the regular expression,
// which runs at tens of MB/s, is not run on it; strings.Contains runs at
// GB/s. A pattern without such strings (\b[A-Z]{2}[0-9]{6}\b) always
// runs.
//
// Case: a literal under (?i) is looked for in the lowercased text; the
// only non-ASCII letters Go's case folding equates with ASCII ones (the
// Kelvin sign, the long s) are NFKC-folded to them in the text's folded
// copy, which is matched too. A folded literal that is not ASCII gives
// no prefilter.

// Bounds of the literal sets: more alternatives, or shorter strings, are
// not worth looking for.
const (
	maxLiteralSet = 16
	maxLiteralLen = 64
	minLiteralLen = 3
)

// litInfo is what a node tells about its matches: exact, the strings it
// matches (nil: unknown, or too many); must, strings one of which each of
// its matches contains (nil: nothing known).
type litInfo struct {
	exact []string
	must  []string
}

// required is the prefilter of pattern p (nil: none).
func required(p string) []string {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return nil
	}
	need := best(literals(re.Simplify()))
	if need == nil || minLen(need) < minLiteralLen {
		return nil
	}
	return need
}

// best is the most useful strings a node's info gives: its exact
// strings when none is empty, else its must.
func best(in litInfo) []string {
	if in.exact != nil && minLen(in.exact) > 0 {
		return in.exact
	}
	return in.must
}

func minLen(set []string) int {
	m := -1
	for _, s := range set {
		if m < 0 || len(s) < m {
			m = len(s)
		}
	}
	return max(m, 0)
}

// better picks the set more likely to rule a text out: the one whose
// shortest string is longer.
func better(a, b []string) []string {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case minLen(b) > minLen(a):
		return b
	}
	return a
}

func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func dedup(set []string) []string {
	slices.Sort(set)
	return slices.Compact(set)
}

// product is every a+b, or nil when the set would be too large or its
// strings too long.
func product(as, bs []string) []string {
	if len(as)*len(bs) > maxLiteralSet {
		return nil
	}
	out := make([]string, 0, len(as)*len(bs))
	for _, a := range as {
		for _, b := range bs {
			if len(a)+len(b) > maxLiteralLen {
				return nil
			}
			out = append(out, a+b)
		}
	}
	return dedup(out)
}

func literals(re *syntax.Regexp) litInfo {
	switch re.Op {
	case syntax.OpLiteral:
		s := string(re.Rune)
		if re.Flags&syntax.FoldCase != 0 && !isASCII(s) {
			return litInfo{}
		}
		if len(s) > maxLiteralLen {
			return litInfo{must: []string{lowerASCII(s[:maxLiteralLen])}}
		}
		return litInfo{exact: []string{lowerASCII(s)}}
	case syntax.OpCharClass:
		var set []string
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			if hi >= utf8.RuneSelf || int(hi-lo)+1+len(set) > 4 {
				return litInfo{}
			}
			for r := lo; r <= hi; r++ {
				set = append(set, lowerASCII(string(r)))
			}
		}
		if len(set) == 0 {
			return litInfo{}
		}
		return litInfo{exact: dedup(set)}
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return litInfo{exact: []string{""}}
	case syntax.OpCapture:
		return literals(re.Sub[0])
	case syntax.OpPlus:
		return litInfo{must: best(literals(re.Sub[0]))}
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return litInfo{must: best(literals(re.Sub[0]))}
		}
		return litInfo{}
	case syntax.OpConcat:
		cur := []string{""}
		var must []string
		all := true
		for _, sub := range re.Sub {
			in := literals(sub)
			if in.exact != nil {
				if p := product(cur, in.exact); p != nil {
					cur = p
					continue
				}
				all = false
				must = better(must, nonEmpty(cur))
				cur = in.exact
				continue
			}
			all = false
			must = better(must, nonEmpty(cur))
			must = better(must, in.must)
			cur = []string{""}
		}
		if all {
			return litInfo{exact: cur}
		}
		return litInfo{must: better(must, nonEmpty(cur))}
	case syntax.OpAlternate:
		var exact, must []string
		exactOK, mustOK := true, true
		for _, sub := range re.Sub {
			in := literals(sub)
			if in.exact == nil {
				exactOK = false
			} else {
				exact = append(exact, in.exact...)
			}
			if b := best(in); b != nil && minLen(b) > 0 {
				must = append(must, b...)
			} else {
				mustOK = false
			}
		}
		var out litInfo
		if exactOK && len(exact) <= maxLiteralSet {
			out.exact = dedup(exact)
		}
		if mustOK && len(must) <= maxLiteralSet {
			out.must = dedup(must)
		}
		return out
	}
	// Any character, stars and questions: nothing known.
	return litInfo{}
}

// nonEmpty is set unless one of its strings is empty (which every text
// contains).
func nonEmpty(set []string) []string {
	if minLen(set) == 0 {
		return nil
	}
	return set
}

// mayMatch reports whether a text whose ASCII-lowercased copy is lower
// contains one of need (nil need: any text may match).
func mayMatch(need []string, lower string) bool {
	if need == nil {
		return true
	}
	for _, s := range need {
		if strings.Contains(lower, s) {
			return true
		}
	}
	return false
}

// litWords is the size of a set of a guard's prefilter strings, in
// 64-bit words: at most maxLiteralSet strings for each of its patterns.
const litWords = (MaxFilters*maxLiteralSet + 63) / 64

// litScan finds which of a guard's prefilter strings a text holds, for
// all its custom patterns in one pass over the text (rather than one
// pass, and a lowercased copy of the text, per string): a table of the
// strings' first two bytes, ASCII-lowercased, picks the places where one
// may start, where it is compared.
type litScan struct {
	lits   []string // lowercased, each at least minLiteralLen bytes
	maxLen int      // the longest of lits
	// offsets[c] has bit k set when some string's k-th byte is c.
	offsets [256]uint64
	pairs   [1024]uint64 // bit (a<<8|b): some string starts with ab
	// The strings of the n-th pair set in pairs (n counts the bits
	// before it: rank[word] plus those below it in its word) are
	// byPair[at[n]:at[n+1]].
	rank   [1024]uint16
	at     []int32
	byPair []int32
	// tri[triHash(t)] is 1 when some string starts with three bytes
	// that read t with every byte's 0x20 bit set (a letter in either
	// case reads the same); a text's positions are tested six at a
	// time, without a branch, before the pairs are looked at. The
	// strings' few prefixes set few of its entries, and a text's three
	// bytes rarely hit one by chance.
	tri [1 << 12]uint8
}

// triHash hashes the three bytes of x (the low 24 bits), whose 0x20
// bits the caller set: their low twelve bits xor their high twelve.
// Without a multiply, it is computed for a text's eight bytes at once
// (x ^ x>>12, then each position's twelve bits).
func triHash(x uint64) uint32 {
	return uint32(x^x>>12) & triMask
}

const triMask = 1<<12 - 1

// asciiLower maps a byte to its ASCII lowercase.
var asciiLower = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
		if 'A' <= i && i <= 'Z' {
			t[i] = byte(i + 'a' - 'A')
		}
	}
	return t
}()

// add registers a prefilter and returns its strings' indices.
func (l *litScan) add(need []string) []int32 {
	ids := make([]int32, 0, len(need))
	for _, s := range need {
		id := int32(slices.Index(l.lits, s))
		if id < 0 {
			id = int32(len(l.lits))
			l.lits = append(l.lits, s)
		}
		ids = append(ids, id)
	}
	l.index()
	return ids
}

func pairOf(s string) uint16 { return uint16(s[0])<<8 | uint16(s[1]) }

// index remakes the pair table from lits.
func (l *litScan) index() {
	l.pairs = [1024]uint64{}
	l.tri = [1 << 12]uint8{}
	l.maxLen = 0
	l.offsets = [256]uint64{}
	for _, s := range l.lits {
		l.maxLen = max(l.maxLen, len(s))
		for k := 0; k < len(s) && k < 64; k++ {
			l.offsets[s[k]] |= 1 << k
		}
		p := pairOf(s)
		l.pairs[p>>6] |= 1 << (p & 63)
		l.tri[triHash(uint64(s[0])|uint64(s[1])<<8|uint64(s[2])<<16|0x202020)] = 1
	}
	n := 0
	for w := range l.pairs {
		l.rank[w] = uint16(n)
		n += bits.OnesCount64(l.pairs[w])
	}
	l.at = make([]int32, n+1)
	for _, s := range l.lits {
		l.at[l.slot(pairOf(s))+1]++
	}
	for k := 1; k <= n; k++ {
		l.at[k] += l.at[k-1]
	}
	l.byPair = make([]int32, len(l.lits))
	fill := slices.Clone(l.at)
	for id, s := range l.lits {
		k := l.slot(pairOf(s))
		l.byPair[fill[k]] = int32(id)
		fill[k]++
	}
}

// slot is the rank of pair p, which is set in pairs.
func (l *litScan) slot(p uint16) int {
	return int(l.rank[p>>6]) + bits.OnesCount64(l.pairs[p>>6]&(1<<(p&63)-1))
}

// scan sets in found (len(lits) bits) the strings text holds, compared
// ASCII-case-insensitively: as if looked for in lowerASCII(text).
func (l *litScan) scan(text string, found []uint64) {
	left := len(l.lits)
	if left == 0 || len(text) < 2 {
		return
	}
	// Every string is at least minLiteralLen (3) bytes: none starts at
	// a position whose three bytes find 0 in tri, and six positions are
	// looked up at once.
	at := 0
	for ; at+8 <= len(text); at += 6 {
		w := load64(text, at) | 0x2020202020202020
		u := w ^ w>>12 // each position's triHash, in its twelve bits
		hit := l.tri[u&triMask] | l.tri[u>>8&triMask] | l.tri[u>>16&triMask] |
			l.tri[u>>24&triMask] | l.tri[u>>32&triMask] | l.tri[u>>40&triMask]
		if hit == 0 {
			continue
		}
		// Most hits are by chance, at one of the six: each position's
		// own entry is looked at again before its pairs are.
		for k := range 6 {
			if l.tri[u>>(8*k)&triMask] != 0 && l.startsAt(text, at+k, found, &left) {
				return
			}
		}
	}
	for ; at+1 < len(text); at++ {
		if l.startsAt(text, at, found, &left) {
			return
		}
	}
}

// startsAt sets in found the strings not found yet that text holds at
// at, and reports whether none is left to find.
func (l *litScan) startsAt(text string, at int, found []uint64, left *int) bool {
	p := uint16(asciiLower[text[at]])<<8 | uint16(asciiLower[text[at+1]])
	if l.pairs[p>>6]&(1<<(p&63)) == 0 {
		return false
	}
	k := l.slot(p)
	for _, id := range l.byPair[l.at[k]:l.at[k+1]] {
		if found[id>>6]&(1<<(id&63)) != 0 {
			continue
		}
		s := l.lits[id]
		if len(text)-at < len(s) || !hasLowerPrefix(text[at:], s) {
			continue
		}
		found[id>>6] |= 1 << (id & 63)
		if *left--; *left == 0 {
			return true
		}
	}
	return false
}

// hasLowerPrefix reports whether lowerASCII(t) starts with s.
func hasLowerPrefix(t, s string) bool {
	for k := 2; k < len(s); k++ {
		if asciiLower[t[k]] != s[k] {
			return false
		}
	}
	return true
}

// mayHold reports whether one of ids is in found (nil ids: no
// prefilter, any text may match).
func mayHold(ids []int32, found []uint64) bool {
	if ids == nil {
		return true
	}
	for _, id := range ids {
		if found[id>>6]&(1<<(id&63)) != 0 {
			return true
		}
	}
	return false
}

// scanChanges is scan of f, the folded copy of text, when found holds
// what scan found in text: a string the copy holds that the text does
// not holds a byte of a change, as its k-th byte for some k (tried where
// it would start), or joins the bytes either side of one that dropped
// its bytes (looked for in the strings' length before it).
func (l *litScan) scanChanges(text string, f *folded, found []uint64) {
	left := len(l.lits)
	if left == 0 {
		return
	}
	t := f.s
	for _, c := range f.changes(text) {
		if c.cb == c.ca {
			for p := max(c.ca-l.maxLen+1, 0); p < c.ca && p+1 < len(t); p++ {
				if l.startsAt(t, p, found, &left) {
					return
				}
			}
			continue
		}
		for x := c.ca; x < c.cb; x++ {
			for m := l.offsets[asciiLower[t[x]]]; m != 0; m &= m - 1 {
				if p := x - bits.TrailingZeros64(m); p >= 0 && p+1 < len(t) && l.startsAt(t, p, found, &left) {
					return
				}
			}
		}
	}
}
