package contentfilter

import (
	"math/bits"
	"slices"
	"sync"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"golang.org/x/text/unicode/norm"
)

// Filters match a folded copy of a text as well as the text itself, so
// that what a reader (or a model) sees as the same words is the same to
// them: NFKC (fullwidth and mathematical letters and digits, ligatures,
// compatibility spaces), default-ignorable characters removed (soft
// hyphen, zero-width space and joiners, word joiner, bidi controls,
// variation selectors, tag characters), every Unicode space a space,
// every dash a hyphen-minus. The builtins' copy also maps common
// Cyrillic and Greek look-alikes to Latin letters and drops combining
// marks left over after composition. A match in a copy is mapped back to
// the span of the original it came from, which is what a redaction
// replaces. ASCII text is its own copy and costs one pass over its bytes.

// folded is a folded copy of a text: s, and the pieces that map its
// bytes back to the spans of the original they came from.
type folded struct {
	s      string
	pieces []piece
	bufs   *foldBufs // where s and pieces live, until release
	// The stretches folding changed (changes), once asked for.
	changeList []change
	changesOK  bool
}

// foldBufs are the buffers of a folded copy, kept in foldPool between
// copies: a copy is as long as its text (a MiB for a MiB), and a scan is
// done with it before the next text's.
type foldBufs struct {
	buf     []byte
	pieces  []piece
	changes []change
}

var foldPool sync.Pool

// release hands f's buffers back for another copy: f, its s included,
// is not to be used after.
func (f *folded) release() {
	if f != nil && f.bufs != nil {
		f.bufs.changes = f.changeList[:0]
		foldPool.Put(f.bufs)
		f.bufs = nil
	}
}

// piece is a stretch of a folded copy, from at to the next piece's at:
// a run of ASCII and kept runes copied as it is (linear: its k-th byte
// is the original's byte orig+k), or bytes that all come from the
// original's [orig, end). A copy of a text with a few characters that
// folding changes has a few pieces, not an offset per byte.
type piece struct {
	at, orig, end int32
	linear        bool
}

// piece is the piece that holds byte i of s.
func (f *folded) piece(i int) *piece {
	lo, hi := 0, len(f.pieces)
	for hi-lo > 1 {
		m := int(uint(lo+hi) >> 1)
		if int(f.pieces[m].at) <= i {
			lo = m
		} else {
			hi = m
		}
	}
	return &f.pieces[lo]
}

// span maps s[a:b] back to the original's span, of whole runes.
func (f *folded) span(a, b int) (int, int) {
	p, q := f.piece(a), f.piece(b-1)
	start, end := int(p.orig), int(q.end)
	if p.linear {
		for a > int(p.at) && !utf8.RuneStart(f.s[a]) {
			a--
		}
		start += a - int(p.at)
	}
	if q.linear {
		for b < len(f.s) && !utf8.RuneStart(f.s[b]) {
			b++
		}
		end = int(q.orig) + b - int(q.at)
	}
	return start, end
}

// isASCII reports whether s has no byte above 0x7F.
func isASCII(s string) bool { return asciiPrefix(s) == len(s) }

// asciiPrefix is the length of s's leading run of ASCII bytes, tested
// sixteen bytes at a time.
func asciiPrefix(s string) int {
	const hi = 0x8080808080808080
	i := 0
	for ; i+16 <= len(s); i += 16 {
		if (load64(s, i)|load64(s, i+8))&hi != 0 {
			break
		}
	}
	for ; i+8 <= len(s); i += 8 {
		if w := load64(s, i) & hi; w != 0 {
			return i + bits.TrailingZeros64(w)>>3
		}
	}
	for ; i < len(s) && s[i] < utf8.RuneSelf; i++ {
	}
	return i
}

// nonASCII counts the bytes of s above 0x7F.
func nonASCII(s string) int {
	n, i := 0, 0
	for ; i+8 <= len(s); i += 8 {
		n += bits.OnesCount64(load64(s, i) & 0x8080808080808080)
	}
	for ; i < len(s); i++ {
		n += int(s[i] >> 7)
	}
	return n
}

// fold returns the folded copy of text (for the builtins: with
// look-alikes mapped) and whether it differs from text; text must not be
// ASCII-only (which needs no copy).
func fold(text string, builtin bool) (folded, bool) {
	f, changed, _ := foldText(text, builtin)
	return f, changed
}

// foldText is fold, and whether the builtins' copy would differ from the
// plain one (a look-alike or a combining mark).
//
// ASCII runs are copied as they are: NFKC leaves ASCII alone, and every
// ASCII character starts a new normalization segment (none composes with
// what precedes it), so only the stretches from the last ASCII character
// before non-ASCII text to the next ASCII character go through NFKC.
func foldText(text string, builtin bool) (f folded, changed, lookalike bool) {
	bufs, _ := foldPool.Get().(*foldBufs)
	if bufs == nil {
		// A non-ASCII rune (two bytes or more) starts a piece and the
		// ASCII run after it another: about as many as the non-ASCII
		// bytes. A buffer that came back is as large as the largest
		// copy it held, and grows if this one needs more.
		// A change holds a non-ASCII rune: fewer than half as many.
		n := nonASCII(text)
		bufs = &foldBufs{pieces: make([]piece, 0, n+2), changes: make([]change, 0, min(n/2+1, 1024))}
	}
	fl := folder{text: text, builtin: builtin,
		buf: slices.Grow(bufs.buf[:0], len(text)), pieces: bufs.pieces[:0]}
	// text[from:i] is ASCII and kept runes, not copied yet: copied in
	// one piece when a rune that folding changes (or may) comes, not a
	// stretch at a time.
	from := 0
	for i := 0; i < len(text); {
		j := i + asciiPrefix(text[i:])
		m := j
		for m < len(text) && text[m] >= utf8.RuneSelf {
			r, n := decodeInert(text, m)
			if n == 0 || inert[r] != kept|stable {
				break
			}
			m += n
		}
		if m == len(text) || text[m] < utf8.RuneSelf {
			i = m
			continue
		}
		if i > from {
			fl.ascii(from, i)
		}
		// A rune at m folding changes (or may): the run of non-ASCII
		// runes at j is, most often, each stable (nothing composes
		// with them): copied as they are, with the ASCII before them,
		// or folded one by one; else undone, and folded below.
		np, nb, changed, lookalike := len(fl.pieces), len(fl.buf), fl.changed, fl.lookalike
		if j > i {
			fl.ascii(i, j)
		}
		if m, ok := fl.stableRun(j); ok {
			i, from = m, m
			continue
		}
		fl.pieces, fl.buf, fl.changed, fl.lookalike = fl.pieces[:np], fl.buf[:nb], changed, lookalike
		k := j
		if j > i {
			k = j - 1 // it may compose with the mark that follows
		}
		if k > i {
			fl.ascii(i, k)
		}
		m = j
		for m < len(text) && text[m] >= utf8.RuneSelf {
			m++
		}
		fl.normalize(k, m)
		i, from = m, m
	}
	if from < len(text) {
		fl.ascii(from, len(text))
	}
	if len(fl.pieces) == 0 {
		fl.pieces = append(fl.pieces, piece{})
	}
	bufs.buf, bufs.pieces = fl.buf, fl.pieces
	// s is buf's bytes, not a copy: nothing writes them before release.
	s := unsafe.String(unsafe.SliceData(fl.buf), len(fl.buf))
	return folded{s: s, pieces: fl.pieces, bufs: bufs, changeList: bufs.changes[:0]}, fl.changed, fl.lookalike
}

// decodeInert decodes the rune at text[m], a byte above 0x7F, when it
// is a valid rune below U+2100 (inert's), in its two or three bytes;
// else n is 0. A call of utf8.DecodeRuneInString costs more than the
// few tests these forms need.
func decodeInert(text string, m int) (r rune, n int) {
	c := text[m]
	switch {
	case c >= 0xC2 && c <= 0xDF:
		if m+1 < len(text) && text[m+1]&0xC0 == 0x80 {
			return rune(c&0x1F)<<6 | rune(text[m+1]&0x3F), 2
		}
	case c >= 0xE0 && c <= 0xE2:
		if m+2 < len(text) && text[m+1]&0xC0 == 0x80 && text[m+2]&0xC0 == 0x80 && (c != 0xE0 || text[m+1] >= 0xA0) {
			if r = rune(c&0x0F)<<12 | rune(text[m+1]&0x3F)<<6 | rune(text[m+2]&0x3F); r < rune(len(inert)) {
				return r, 3
			}
		}
	}
	return 0, 0
}

// folder builds a folded copy.
type folder struct {
	text               string
	builtin            bool
	buf                []byte
	pieces             []piece
	changed, lookalike bool
	it                 norm.Iter // reused: it is large, and a text may have many stretches
}

// normalize folds text[from:to], which starts and ends at normalization
// segment boundaries.
func (fl *folder) normalize(from, to int) {
	// (An invalid byte misleads the quick check.)
	if s := fl.text[from:to]; stableRunes(s) || (utf8.ValidString(s) && norm.NFKC.QuickSpanString(s) == len(s)) {
		fl.stable(from, to)
		return
	}
	fl.normalizeSegments(from, to)
}

// stable folds text[from:to], which NFKC leaves as it is (most text:
// accented letters, typographic quotes): rune by rune, as
// normalizeSegments maps a segment NFKC leaves alone, without its
// copies.
func (fl *folder) stable(from, to int) {
	text := fl.text
	for at := from; at < to; {
		r, n := utf8.DecodeRuneInString(text[at:])
		if r < rune(len(inert)) && inert[r]&kept != 0 {
			// Kept as it is, in either copy, and no look-alike.
			fl.keep(at, at+n)
			at += n
			continue
		}
		fl.fold(r, at, at+n)
		at += n
	}
}

// fold appends r, which came from the original's [a, b), folded.
func (fl *folder) fold(r rune, a, b int) {
	if !fl.builtin && r >= utf8.RuneSelf && !fl.lookalike {
		fl.lookalike = lookalike(r)
	}
	out, keep := foldRune(r, fl.builtin)
	if out != r || !keep {
		fl.changed = true
	}
	if !keep {
		return
	}
	if out < utf8.RuneSelf && b == a+1 {
		fl.ascii(a, b)
		return
	}
	fl.add(a, b)
	fl.buf = utf8.AppendRune(fl.buf, out)
}

// stableRun folds the run of non-ASCII runes at j, as stable does, and
// returns its end, when each is stable (inert); ok is false (and what
// it appended is to be undone) at the first that is not.
func (fl *folder) stableRun(j int) (end int, ok bool) {
	text := fl.text
	m := j
	for m < len(text) && text[m] >= utf8.RuneSelf {
		r, n := decodeInert(text, m)
		if n == 0 {
			return m, false // invalid, or no rune inert knows
		}
		if inert[r]&stable == 0 {
			return m, false
		}
		if inert[r]&kept != 0 {
			fl.keep(m, m+n)
		} else {
			fl.fold(r, m, m+n)
		}
		m += n
	}
	return m, true
}

// keep appends the original's rune [a, b) as it is.
func (fl *folder) keep(a, b int) { fl.ascii(a, b) }

// stableRunes reports whether s has only ASCII and runes that inert
// marks stable: it is then in NFKC, without asking NFKC's tables.
func stableRunes(s string) bool {
	for _, r := range s {
		if r >= utf8.RuneSelf && (r >= rune(len(inert)) || inert[r]&stable == 0) {
			return false
		}
	}
	return true
}

// inert says of each rune below U+2100 (Latin, Greek, Cyrillic, general
// punctuation: most non-ASCII text) whether it is kept, folding to
// itself in either copy and no look-alike, and whether it is stable, a
// rune NFKC leaves alone that combines with nothing before it: a text
// of such runes and ASCII is in NFKC.
var inert = func() (t [0x2100]uint8) {
	var buf [utf8.UTFMax]byte
	for r := rune(utf8.RuneSelf); r < rune(len(t)); r++ {
		_, conf := confusables[r]
		a, keepA := foldRune(r, false)
		b, keepB := foldRune(r, true)
		if !conf && !unicode.Is(unicode.Mn, r) && keepA && keepB && a == r && b == r {
			t[r] = kept
		}
		enc := utf8.AppendRune(buf[:0], r)
		if p := norm.NFKC.Properties(enc); norm.NFKC.QuickSpan(enc) == len(enc) && p.BoundaryBefore() && p.CCC() == 0 {
			t[r] |= stable
		}
	}
	return t
}()

// What inert says of a rune.
const (
	kept uint8 = 1 << iota
	stable
)

// normalizeSegments is normalize through NFKC's segments.
func (fl *folder) normalizeSegments(from, to int) {
	text := fl.text
	it := &fl.it
	it.InitString(norm.NFKC, text[from:to])
	// A long expansion comes in pieces that consume no input but the
	// last: their bytes' ends are known once the input moves on.
	pending := -1
	for !it.Done() {
		p0 := from + it.Pos()
		seg := it.Next()
		p1 := from + it.Pos()
		if p1 == p0 {
			if pending < 0 {
				pending = len(fl.pieces)
			}
			p1 = -1
		}
		// A segment NFKC left alone maps rune by rune; one it rewrote
		// maps as a whole to its source.
		same := p1 >= 0 && string(seg) == text[p0:p1]
		fl.changed = fl.changed || !same
		at := p0
		for len(seg) > 0 {
			r, n := utf8.DecodeRune(seg)
			seg = seg[n:]
			a, b := p0, p1
			if same {
				a, b = at, at+n
				at += n
			}
			fl.fold(r, a, b)
		}
		if p1 >= 0 && pending >= 0 {
			fl.settle(pending, p1)
			pending = -1
		}
	}
	if pending >= 0 {
		fl.settle(pending, to)
	}
}

// ascii appends the original's ASCII bytes [a, b), or kept runes,
// copied as they are.
func (fl *folder) ascii(a, b int) {
	if n := len(fl.pieces); n == 0 || !fl.pieces[n-1].linear ||
		int(fl.pieces[n-1].orig)+len(fl.buf)-int(fl.pieces[n-1].at) != a {
		fl.pieces = append(fl.pieces, piece{at: int32(len(fl.buf)), orig: int32(a), linear: true})
	}
	fl.buf = append(fl.buf, fl.text[a:b]...)
}

// add starts the bytes about to be appended from the original's [a, b)
// (b < 0: not known yet), unless the last piece already maps there.
func (fl *folder) add(a, b int) {
	if n := len(fl.pieces); n > 0 {
		if p := &fl.pieces[n-1]; !p.linear && b >= 0 && int(p.orig) == a && int(p.end) == b {
			return
		}
	}
	fl.pieces = append(fl.pieces, piece{at: int32(len(fl.buf)), orig: int32(a), end: int32(b)})
}

// settle gives the pieces from the pending-th on, which came before the
// input moved on, their end.
func (fl *folder) settle(pending, end int) {
	for i := pending; i < len(fl.pieces); i++ {
		if fl.pieces[i].end < 0 {
			fl.pieces[i].end = int32(end)
		}
	}
}

// foldRune is what r becomes in a folded copy (after NFKC); keep is
// false for a rune that is dropped.
func foldRune(r rune, builtin bool) (out rune, keep bool) {
	if r < utf8.RuneSelf {
		return r, true
	}
	var c uint8
	if r < rune(len(runeClasses)) {
		c = runeClasses[r]
	} else {
		c = runeClass(r)
	}
	switch {
	case c&classIgnorable != 0:
		return 0, false
	case c&classSpace != 0:
		return ' ', true
	case c&classDash != 0:
		return '-', true
	}
	if builtin && c&(classConfusable|classMark) != 0 {
		if c, ok := confusables[r]; ok {
			return c, true
		}
		return 0, false
	}
	return r, true
}

// lookalike reports whether the builtins' copy maps r, which the plain
// copy keeps: a look-alike or a combining mark.
func lookalike(r rune) bool {
	if r < rune(len(runeClasses)) {
		return runeClasses[r]&(classConfusable|classMark) != 0
	}
	return runeClass(r)&(classConfusable|classMark) != 0
}

// What foldRune asks of a rune (runeClass).
const (
	classIgnorable uint8 = 1 << iota
	classSpace
	classDash
	classConfusable
	classMark // a combining mark (Mn)
)

// runeClass is what foldRune asks of r, from Unicode's tables.
func runeClass(r rune) uint8 {
	var c uint8
	if unicode.Is(ignorable, r) {
		c |= classIgnorable
	}
	if unicode.Is(unicode.White_Space, r) {
		c |= classSpace
	}
	if unicode.Is(unicode.Pd, r) || r == '\u2212' || r == '\u2043' {
		c |= classDash
	}
	if _, ok := confusables[r]; ok {
		c |= classConfusable
	}
	if unicode.Is(unicode.Mn, r) {
		c |= classMark
	}
	return c
}

// runeClasses is runeClass of the runes below U+2100, looked up where
// most text's runes are, instead of searched for in Unicode's tables.
var runeClasses = func() (t [0x2100]uint8) {
	for r := range rune(len(t)) {
		t[r] = runeClass(r)
	}
	return t
}()

// ignorable is Unicode's Default_Ignorable_Code_Point (what renders as
// nothing): the soft hyphen, combining grapheme joiner, zero-width
// space, non-joiner and joiner, bidi marks and controls, word joiner and
// invisible operators, Hangul fillers, variation selectors, the BOM,
// interlinear annotation and tag characters.
var ignorable = &unicode.RangeTable{
	R16: []unicode.Range16{
		{Lo: 0x00AD, Hi: 0x00AD, Stride: 1},
		{Lo: 0x034F, Hi: 0x034F, Stride: 1},
		{Lo: 0x061C, Hi: 0x061C, Stride: 1},
		{Lo: 0x115F, Hi: 0x1160, Stride: 1},
		{Lo: 0x17B4, Hi: 0x17B5, Stride: 1},
		{Lo: 0x180B, Hi: 0x180F, Stride: 1},
		{Lo: 0x200B, Hi: 0x200F, Stride: 1},
		{Lo: 0x202A, Hi: 0x202E, Stride: 1},
		{Lo: 0x2060, Hi: 0x206F, Stride: 1},
		{Lo: 0x3164, Hi: 0x3164, Stride: 1},
		{Lo: 0xFE00, Hi: 0xFE0F, Stride: 1},
		{Lo: 0xFEFF, Hi: 0xFEFF, Stride: 1},
		{Lo: 0xFFA0, Hi: 0xFFA0, Stride: 1},
		{Lo: 0xFFF0, Hi: 0xFFF8, Stride: 1},
	},
	R32: []unicode.Range32{
		{Lo: 0x1BCA0, Hi: 0x1BCA3, Stride: 1},
		{Lo: 0x1D173, Hi: 0x1D17A, Stride: 1},
		{Lo: 0xE0000, Hi: 0xE0FFF, Stride: 1},
	},
}

// confusables maps the Cyrillic and Greek letters that look like Latin
// ones (Unicode's confusables for the Latin alphabet, the common part)
// to them, for the builtins, whose words and shapes are Latin.
var confusables = map[rune]rune{
	// Cyrillic
	'а': 'a', 'в': 'b', 'е': 'e', 'к': 'k', 'м': 'm', 'н': 'h', 'о': 'o', 'р': 'p', 'с': 'c', 'т': 't',
	'у': 'y', 'х': 'x', 'ѕ': 's', 'і': 'i', 'ј': 'j', 'ԁ': 'd', 'ԛ': 'q', 'ԝ': 'w', 'ӏ': 'l', 'ɡ': 'g',
	'А': 'A', 'В': 'B', 'Е': 'E', 'К': 'K', 'М': 'M', 'Н': 'H', 'О': 'O', 'Р': 'P', 'С': 'C', 'Т': 'T',
	'У': 'Y', 'Х': 'X', 'Ѕ': 'S', 'І': 'I', 'Ј': 'J', 'Ԁ': 'D', 'Ԛ': 'Q', 'Ԝ': 'W', 'Ӏ': 'I',
	// Greek
	'α': 'a', 'ο': 'o', 'ν': 'v', 'ι': 'i', 'κ': 'k', 'ρ': 'p', 'τ': 't', 'υ': 'u', 'χ': 'x',
	'Α': 'A', 'Β': 'B', 'Ε': 'E', 'Ζ': 'Z', 'Η': 'H', 'Ι': 'I', 'Κ': 'K', 'Μ': 'M', 'Ν': 'N', 'Ο': 'O',
	'Ρ': 'P', 'Τ': 'T', 'Υ': 'Y', 'Χ': 'X',
	// Latin look-alikes NFKC keeps
	'ı': 'i', 'ȷ': 'j', 'ℓ': 'l',
}
