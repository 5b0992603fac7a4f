package contentfilter

// A text and its folded copy are the same bytes outside the stretches
// folding changed, so a filter finds the same things in both there: the
// copy is scanned only around its changes, and what a scan of the text
// found stands for the rest. Most non-ASCII text (accented letters,
// typographic quotes) folds to itself and has few changes; a text with
// a change every few bytes is scanned twice, as before.

// change is a stretch folding changed: text[oa:ob] became copy[ca:cb].
// Between two changes the text and the copy are the same bytes.
type change struct {
	oa, ob, ca, cb int
}

// changes lists the stretches of text (f's original) that f changed, in
// order, found from f's pieces: a piece that copied its bytes as they
// are changed nothing, a byte no piece came from was dropped.
func (f *folded) changes(text string) []change {
	if f.changesOK {
		return f.changeList
	}
	f.changesOK = true
	out := f.changeList[:0]
	add := func(oa, ob, ca, cb int) {
		if n := len(out); n > 0 && out[n-1].ob >= oa && out[n-1].cb >= ca {
			out[n-1].ob, out[n-1].cb = max(out[n-1].ob, ob), max(out[n-1].cb, cb)
			return
		}
		out = append(out, change{oa, ob, ca, cb})
	}
	o, c := 0, 0 // the ends of the text and copy matched so far
	for k := range f.pieces {
		p := &f.pieces[k]
		at, cend := int(p.at), len(f.s)
		if k+1 < len(f.pieces) {
			cend = int(f.pieces[k+1].at)
		}
		oa, ob := int(p.orig), int(p.end)
		if p.linear {
			ob = oa + cend - at
		}
		same := p.linear || (ob-oa == cend-at && text[oa:ob] == f.s[at:cend])
		switch {
		case same && oa == o:
		case same && oa > o:
			add(o, oa, c, at) // dropped
		default:
			add(min(o, oa), max(ob, o), c, cend)
		}
		o, c = max(o, ob), cend
	}
	if o < len(text) || c < len(f.s) {
		add(o, len(text), c, len(f.s))
	}
	f.changeList = out
	return out
}

// lastNonASCII is the index of the last byte of s above 0x7F, or -1.
func lastNonASCII(s string) int {
	i := len(s)
	for ; i >= 8; i -= 8 {
		if load64(s, i-8)&0x8080808080808080 != 0 {
			break
		}
	}
	for i > 0 {
		i--
		if s[i] >= 0x80 {
			return i
		}
	}
	return -1
}

// A token detector started at a byte reads from two bytes before it to
// the first non-ASCII character after it, at most: its hand-written
// loops read ASCII classes only, and its regular expressions, whose
// characters are ASCII, run on a window from there and stop at a
// character none of them accepts (the only non-ASCII characters an ASCII
// letter matches case-insensitively, the Kelvin sign and the long s,
// NFKC folds, so they are changes). A start that has a non-ASCII byte of
// the text before the next change after it acts alike in the text and
// the copy.

// scanTokenPair is scanTokens of text, to emit, and of its folded copy f,
// to emitCopy, except where the copy's scan would find what the text's
// found at the same place: the copy is walked from the first start that
// may read into a change, with the text's walk's state there, until past
// the change both walks go on alike.
func scanTokenPair(text string, f *folded, want, kinds uint8, emit, emitCopy func(det uint8, kind numberKind, a, b int)) {
	ch := f.changes(text)
	a := tokWalk{s: text, want: want, kinds: kinds, colon: -1}
	b := tokWalk{s: f.s, want: want, kinds: kinds, colon: -1}
	// safe is where the starts before change k end: each start up to
	// the last non-ASCII byte before it, from at on.
	safe := func(at, k int) int {
		if at >= ch[k].oa {
			return at
		}
		return at + lastNonASCII(text[at:ch[k].oa]) + 1
	}
	at, until := 0, -1 // until: safe(at, k), when known
	for k := 0; k < len(ch); {
		if until < at {
			until = safe(at, k)
		}
		at = a.run(at, until, emit)
		// The copy's walk starts with the text's state, moved to the
		// copy's places.
		delta := ch[k].ca - ch[k].oa
		// (b.colon stays: where the copy's next ':' is.)
		for d := range b.next {
			b.next[d] = a.next[d] + delta
		}
		bt := at + delta
		stop := ch[k].ob + 2 // past the bytes a start looks back at
		k++
		for {
			delta = ch[k-1].cb - ch[k-1].ob
			at = a.run(at, stop, emit)
			bt = b.run(bt, stop+delta, emitCopy)
			if at >= len(text) {
				b.run(bt, len(f.s), emitCopy)
				return
			}
			if k < len(ch) {
				until = safe(at, k)
			}
			if k < len(ch) && until == at {
				// The next change is near: the copy's walk goes on
				// through it.
				stop = max(stop, ch[k].ob+2)
				k++
				continue
			}
			if at+delta == bt && alike(&a, &b, at, delta) {
				break
			}
			stop = max(at, bt-delta) + 16
		}
	}
	a.run(at, len(text), emit)
}

// alike reports whether walks a, at i, and b, at i+delta, go on alike
// over the same bytes: each detector free to start in both, or in both
// going on at the same place.
func alike(a, b *tokWalk, i, delta int) bool {
	for d := range a.next {
		an, bn := a.next[d], b.next[d]
		if !(an <= i && bn <= i+delta) && an+delta != bn {
			return false
		}
	}
	return true
}
