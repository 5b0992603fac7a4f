package contentfilter

import (
	"maps"
	"math/bits"
	"net/netip"
	"regexp"
	"slices"
	"strings"
)

// A detector reports the byte ranges of what it finds in s, in order and
// without overlap.
type detector func(s string, emit func(start, end int))

// The builtin detectors are hand-written scans with a cheap first pass
// (an '@', a digit, a capital letter, a trigger word), so that text
// without a candidate costs one pass over its bytes; a regular expression
// runs only on a short window at a candidate. They read ASCII only, and
// stop at the first other character: a folded copy is scanned only
// around its changes on that ground (scanTokenPair).
var detectors = map[string]detector{
	"email":                  findEmails,
	"phone":                  findNumbers(kindPhone),
	"ssn":                    findNumbers(kindSSN),
	"credit-card":            findNumbers(kindCard),
	"ip-address":             findIPs,
	"person-name":            findNames,
	"address":                findAddresses,
	"regex-prompt-injection": findInjections,
}

func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isUpper(c byte) bool  { return c >= 'A' && c <= 'Z' }
func isLower(c byte) bool  { return c >= 'a' && c <= 'z' }
func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
func isAlnum(c byte) bool  { return byteClass[c]&clAlnum != 0 }

// byteClass classifies bytes for the detectors' skip loops, which look
// at every byte of a text.
const (
	clAlnum   = 1 << iota // a letter or digit
	clWord                // a letter, digit or _
	clIP                  // isIPChar or a letter: a byte an IP scan passes over
	clIPStart             // a hex digit or ':', where an IP address may start
)

var byteClass = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		b := byte(c)
		if isDigit(b) || isUpper(b) || isLower(b) {
			t[c] |= clAlnum | clWord | clIP
		}
		if b == '_' {
			t[c] |= clWord
		}
		if isIPChar(b) {
			t[c] |= clIP
		}
		if isIPChar(b) && b != '.' {
			t[c] |= clIPStart
		}
	}
	return t
}()

// ---- one pass for the token builtins ----

// The builtins other than e-mail look for what starts at a token: an IP
// address at a hex digit or ':', a number at a digit, a street address
// at a digit or P, a name or an injection phrasing at a word, a role tag
// at '<' or '['; each at a byte its predecessor does not glue to a
// longer token. scanTokens walks the text once for all of them: the byte
// and its predecessor say which may start there (tokStart and tokGlue),
// and each detector reads on from there, skipping the places before the
// end of what it last read.
const (
	tokIP uint8 = 1 << iota
	tokNumber
	tokAddress
	tokName
	tokInjection
	tokTag
	tokCount = iota
)

// tokStart are the detectors that may start at a byte; tokGlue those a
// byte glues to the next.
var tokStart, tokGlue = func() (start, glue [256]uint8) {
	for c := 0; c < 256; c++ {
		b := byte(c)
		if isIPChar(b) && b != '.' {
			start[c] |= tokIP
		}
		if isDigit(b) {
			start[c] |= tokNumber | tokAddress
		}
		if b == 'P' || b == 'p' {
			start[c] |= tokAddress
		}
		if isLetter(b) {
			start[c] |= tokName | tokInjection
		}
		if b == '<' || b == '[' {
			start[c] |= tokTag
		}
		if isAlnum(b) {
			glue[c] |= tokIP | tokNumber | tokAddress | tokName | tokInjection
		}
		if isIPChar(b) {
			glue[c] |= tokIP
		}
		if b == '_' {
			glue[c] |= tokNumber
		}
		if b == '\'' {
			glue[c] |= tokName
		}
	}
	return start, glue
}()

// letters7 is how many of w's seven low bytes, from its lowest, are
// ASCII letters (7: all; the eighth byte is not looked at, so that the
// count of trailing zeros has a bit to find, one instruction where a
// word of zeros would take three). Each byte, its 0x20 bit set
// (lowercase), is compared with 'a' and 'z' by adds whose high bits say
// x >= 'a' and x > 'z'. A byte above 0x7F carries into the next or
// reads as no letter (above 'z', or below 'a' once its add wrapped):
// only the bytes after the first that is no letter take a carry, and
// they do not count.
func letters7(w uint64) int {
	const hi = 0x8080808080808080
	x := w | 0x2020202020202020
	ge := x + 0x1f1f1f1f1f1f1f1f // high bit: x >= 'a'
	gt := x + 0x0505050505050505 // high bit: x > 'z'
	return bits.TrailingZeros64((^ge|gt)&hi|1<<63) >> 3
}

// letterGlue is every letter's tokGlue.
var letterGlue = tokGlue['a']

// scanTokens emits what the detectors of want find in s (number: the
// kinds of kinds), each detector's finds in order.
func scanTokens(s string, want, kinds uint8, emit func(det uint8, kind numberKind, a, b int)) {
	w := tokWalk{s: s, want: want, kinds: kinds, colon: -1}
	w.run(0, len(s), emit)
}

// tokWalk is scanTokens' walk over s, which can stop at a place and go
// on from it: what it carries from one place to the next is where each
// detector goes on (colon only saves a search).
type tokWalk struct {
	s           string
	want, kinds uint8
	next        [tokCount]int
	colon       int
}

// run walks the places in [from, to) where a detector may start, and
// returns where it stopped: to, or past it at the end of a word.
func (w *tokWalk) run(from, to int, emit func(det uint8, kind numberKind, a, b int)) int {
	var i int
	i, w.next, w.colon = walkTokens(w.s, from, to, w.want, w.kinds, w.next, w.colon, emit)
	return i
}

// walkTokens is tokWalk.run, its state in next and colon.
func walkTokens(s string, from, to int, want, kinds uint8, next [tokCount]int, colon int,
	emit func(det uint8, kind numberKind, a, b int)) (int, [tokCount]int, int) {
	// The starts are head's bytes; the detectors read on in s.
	head := s[:min(to, len(s))]
	glue := uint8(0)
	if from > 0 && from <= len(s) {
		glue = tokGlue[s[from-1]]
	}
	emitIP := func(a, b int) { emit(tokIP, 0, a, b) }
	emitNumber := func(k numberKind, a, b int) { emit(tokNumber, k, a, b) }
	emitAddress := func(a, b int) { emit(tokAddress, 0, a, b) }
	emitName := func(a, b int) { emit(tokName, 0, a, b) }
	emitInjection := func(a, b int) { emit(tokInjection, 0, a, b) }
	i := from
	for ; i < len(head); i++ {
		c := head[i]
		m := tokStart[c] &^ glue & want
		glue = tokGlue[c]
		if m == 0 {
			continue
		}
		if m&(tokName|tokInjection) != 0 {
			// A word: of the other detectors only an IP address (at a
			// hex letter) and a post office box (at P) may start here.
			// ipAt's first test: no IPv6 address that far from the next
			// ':'. Tested first, as it is nearly always so (whether a
			// word starts with a hex letter is not). next[0] is left
			// where it was, at or before i: free to start, as i+1.
			if colon <= i+5 && m&tokIP != 0 && i >= next[0] {
				next[0] = ipAt(s, i, &colon, emitIP)
			}
			// addressAt's first test: P, then O or '.'.
			if m&tokAddress != 0 && i >= next[2] && i+4 < len(s) && (s[i+1]|0x20 == 'o' || s[i+1] == '.') {
				next[2] = addressAt(s, i, emitAddress)
			}
			// The word's end, seven bytes at a time (inline: a call
			// costs more than most words' byte loop).
			j := i + 1
			for {
				if j+8 > len(s) {
					for j < len(s) && isLetter(s[j]) {
						j++
					}
					break
				}
				n := letters7(load64(s, j))
				if j += n; n < 7 {
					break
				}
			}
			// Most words are no cue, name or trigger: one lookup says
			// so, and neither detector is asked (each would return j).
			if cl := wordClass(s[i:j]); cl != 0 {
				if m&tokName != 0 && i >= next[3] && cl&wordName != 0 {
					next[3] = nameAt(s, i, j, emitName)
				}
				if m&tokInjection != 0 && i >= next[4] && cl&wordTrigger != 0 {
					next[4] = injectionAt(s, i, j, emitInjection)
				}
			}
			// Within the word no detector starts: on from its end, a
			// letter's glue before it; or, at the space most words end
			// with, which starts nothing and glues to nothing, from
			// after it.
			i, glue = j-1, letterGlue
			if j < len(head) && head[j] == ' ' {
				i, glue = j, 0
			}
			continue
		}
		// At a digit, the byte after its run of digits (0 at the end)
		// rules out most IP and street addresses without a call.
		run, after := 0, byte(0)
		if isDigit(c) {
			r := i + 1
			for r < len(s) && isDigit(s[r]) {
				r++
			}
			run = r - i
			if r < len(s) {
				after = s[r]
			}
		}
		// ipAt's first tests: no IPv4 address without a '.' and a
		// digit after the digits, and no IPv6 address that far from
		// the next ':' (next[0] left at or before i, as at a word).
		if m&tokIP != 0 && i >= next[0] &&
			(colon <= i+5 || c <= '9' && after == '.' && i+run+1 < len(s) && isDigit(s[i+run+1])) {
			next[0] = ipAt(s, i, &colon, emitIP)
		}
		if m&tokNumber != 0 && i >= next[1] {
			// numberAt's first test: a run of too few digits for any
			// kind that no separator and digit, ')' or letter goes on
			// from (a year, a count) is read on from after the byte
			// that ends it, as numberAt would.
			short := run < fewestDigits
			switch {
			case !short, isLetter(after), after == '_', after == ')':
				short = false
			case after == ' ' || after == '-' || after == '.':
				short = i+run+1 >= len(s) || !isDigit(s[i+run+1])
			}
			if short {
				next[1] = i + run + 1
			} else {
				next[1] = numberAt(s, i, kinds, emitNumber)
			}
		}
		if m&tokAddress != 0 && i >= next[2] {
			// addressAt's first tests: at most seven digits, then a
			// capital or a space and a capital or digit; or P and O or
			// '.'.
			if run > 0 && run <= 7 && (isUpper(after) ||
				after == ' ' && i+run+1 < len(s) && (isUpper(s[i+run+1]) || isDigit(s[i+run+1]))) ||
				run == 0 && i+4 < len(s) && (s[i+1]|0x20 == 'o' || s[i+1] == '.') {
				next[2] = addressAt(s, i, emitAddress)
			} else {
				next[2] = i + 1
			}
		}
		if m&tokTag != 0 && i >= next[4] {
			next[4] = tagAt(s, i, emitInjection)
		}
		// Within the run of digits no detector starts (each digit
		// glues to the next, and a tag starts at '<' or '['): on from
		// its last digit.
		if run > 1 {
			i, glue = i+run-1, tokGlue['0']
		}
	}
	return i, next, colon
}

// What a word may be, by its shape (wordClass): a name or a name's cue
// (nameAt), or an injection's trigger word (injectionAt).
const (
	wordName uint8 = 1 << iota
	wordTrigger
)

// wordClasses holds, by a hash of a word's length and its first, second
// and last letters (any case), what the words of that shape may be: a
// superset, so that a word whose entry is 0 is none of them.
var wordClasses = func() (t [1 << 12]uint8) {
	for _, w := range honorifics {
		t[wordHash(w)] |= wordName
	}
	for _, w := range cueWords {
		t[wordHash(w)] |= wordName
	}
	for w := range firstNames {
		t[wordHash(w)] |= wordName
	}
	for w := range overrideVerbs {
		t[wordHash(w)] |= wordTrigger
	}
	for w := range nextWords {
		t[wordHash(w)] |= wordTrigger
	}
	return t
}()

// wordHash hashes w (ASCII letters, at least two) by its shape.
func wordHash(w string) uint32 {
	k := uint32(len(w)) | uint32(w[0]&31)<<5 | uint32(w[1]&31)<<10 | uint32(w[len(w)-1]&31)<<15
	return k * 0x9E3779B1 >> 20
}

// wordClass is what the word w may be (0: none).
func wordClass(w string) uint8 {
	if len(w) < 2 || len(w) > 16 {
		return 0
	}
	return wordClasses[wordHash(w)]
}

// ---- e-mail ----

func isLocalChar(c byte) bool {
	return isAlnum(c) || c == '.' || c == '_' || c == '%' || c == '+' || c == '-'
}

func isDomainChar(c byte) bool { return isAlnum(c) || c == '-' || c == '.' }

// findEmails finds local@domain.tld: a local part of letters, digits and
// ._%+-, a domain of at least two labels and a top-level label of two or
// more letters.
func findEmails(s string, emit func(int, int)) {
	from, floor := 0, 0 // floor: the end of the last match
	for {
		at := strings.IndexByte(s[from:], '@')
		if at < 0 {
			return
		}
		at += from
		start := at
		for start > floor && isLocalChar(s[start-1]) && at-start < 64 {
			start--
		}
		for start < at && s[start] == '.' {
			start++
		}
		end := at + 1
		for end < len(s) && isDomainChar(s[end]) && end-at < 255 {
			end++
		}
		for end > at+1 && (s[end-1] == '.' || s[end-1] == '-') {
			end--
		}
		if start < at && validDomain(s[at+1:end]) {
			emit(start, end)
			from, floor = end, end
		} else {
			from = at + 1
		}
		if from >= len(s) {
			return
		}
	}
}

func validDomain(d string) bool {
	dot := strings.LastIndexByte(d, '.')
	if dot <= 0 || strings.Contains(d, "..") || d[0] == '-' || d[0] == '.' {
		return false
	}
	tld := d[dot+1:]
	if len(tld) < 2 {
		return false
	}
	for i := 0; i < len(tld); i++ {
		if !isUpper(tld[i]) && !isLower(tld[i]) {
			return false
		}
	}
	return true
}

// ---- numbers: phone, SSN, card ----

type numberKind uint8

const (
	kindPhone numberKind = iota + 1
	kindSSN
	kindCard
)

// A number span is digits in groups separated by single spaces, dashes or
// dots (a phone's area code may be in parentheses, with a leading +).
type numberSpan struct {
	start, end int
	groups     [12][2]int // byte ranges of the digit groups
	n          int
	seps       [12]byte // separator before group i (0 for the first)
	plus       bool     // a leading +
	paren      bool     // group 0 was in parentheses
}

// findNumbers finds the spans of kind; each span of digits is classified
// whole, else by its longest runs of consecutive groups.
func findNumbers(kind numberKind) detector {
	return func(s string, emit func(int, int)) {
		scanTokens(s, tokNumber, kind.bit(), func(_ uint8, _ numberKind, a, b int) { emit(a, b) })
	}
}

// spanKind emits the parts of a span that are of kind.
func spanKind(s string, sp *numberSpan, kind numberKind, emit func(int, int)) {
	for a := 0; a < sp.n; {
		matched := false
		for b := sp.n; b > a; b-- {
			if classify(s, sp, a, b) == kind {
				st, en := sp.groups[a][0], sp.groups[b-1][1]
				if a == 0 && sp.paren {
					st--
				}
				if a == 0 && sp.plus {
					st--
				}
				emit(max(st, 0), en)
				a, matched = b, true
				break
			}
		}
		if !matched {
			a++
		}
	}
}

// bit is the kind's bit in a set of kinds.
func (k numberKind) bit() uint8 { return 1 << k }

// numberKinds are the builtins that read numbers.
var numberKinds = map[string]numberKind{"phone": kindPhone, "ssn": kindSSN, "credit-card": kindCard}

// tokDetectors are the builtins scanTokens runs.
var tokDetectors = map[string]uint8{"phone": tokNumber, "ssn": tokNumber, "credit-card": tokNumber,
	"ip-address": tokIP, "address": tokAddress, "person-name": tokName, "regex-prompt-injection": tokInjection | tokTag}

// minDigits is the fewest digits of a number of kind (classify): a
// phone number has 10 (NANP), or 8 after a + (plus: the span has one);
// an SSN 9; a card 13. A span with fewer holds none.
// fewestDigits is the least minDigits.
const fewestDigits = 8

func minDigits(kind numberKind, plus bool) int {
	switch kind {
	case kindPhone:
		if plus {
			return 8
		}
		return 10
	case kindSSN:
		return 9
	}
	return 13
}

// digits counts the span's digits.
func (sp *numberSpan) digits() int {
	n := 0
	for g := 0; g < sp.n; g++ {
		n += sp.groups[g][1] - sp.groups[g][0]
	}
	return n
}

// eachNumberSpan calls fn for each span of digit groups in s.
// numberAt reads the span of digit groups starting at i (a digit not
// within a word) and emits its parts of kinds; it returns where the scan
// goes on.
func numberAt(s string, i int, kinds uint8, emit func(numberKind, int, int)) int {
	// Most numbers (a year, a count, a date) have fewer digits than any
	// kind asked for: spanDigits says so without the span's groups.
	end, digits := spanDigits(s, i)
	if digits < fewestDigits {
		return end
	}
	plus := i > 0 && s[i-1] == '+' || i > 1 && s[i-1] == '(' && s[i-2] == '+'
	enough := false
	for _, kind := range [...]numberKind{kindPhone, kindSSN, kindCard} {
		enough = enough || kinds&kind.bit() != 0 && digits >= minDigits(kind, plus)
	}
	if !enough {
		return end
	}
	sp := numberSpan{start: i}
	if i > 0 && s[i-1] == '(' {
		sp.paren = true
		if i > 1 && s[i-2] == '+' {
			sp.plus = true
		}
	} else if i > 0 && s[i-1] == '+' {
		sp.plus = true
	}
	j := i
	for sp.n < len(sp.groups) {
		k := j
		for k < len(s) && isDigit(s[k]) {
			k++
		}
		sp.groups[sp.n] = [2]int{j, k}
		sp.n++
		// The separator to the next group: one of " -." or ") " / ")"
		// after a parenthesized first group.
		if k >= len(s) {
			j = k
			break
		}
		next := k
		var sep byte
		switch {
		case sp.n == 1 && sp.paren && s[k] == ')':
			next = k + 1
			sep = ')'
			if next < len(s) && (s[next] == ' ' || s[next] == '-') {
				next++
			}
		case s[k] == ' ' || s[k] == '-' || s[k] == '.':
			sep = s[k]
			next = k + 1
		}
		if sep == 0 || next >= len(s) || !isDigit(s[next]) || sp.n == len(sp.groups) {
			j = k
			break
		}
		sp.seps[sp.n] = sep
		j = next
	}
	// A span glued to letters or to more digits is part of a word.
	if j < len(s) && (isAlnum(s[j]) || s[j] == '_') {
		for j < len(s) && (isAlnum(s[j]) || s[j] == '_') {
			j++
		}
		return j
	}
	sp.end = j
	d := sp.digits()
	if d < fewestDigits {
		return j + 1 // most numbers: a year, a count
	}
	for _, kind := range [...]numberKind{kindPhone, kindSSN, kindCard} {
		if kinds&kind.bit() != 0 && d >= minDigits(kind, sp.plus) {
			spanKind(s, &sp, kind, func(a, b int) { emit(kind, a, b) })
		}
	}
	return j + 1
}

// spanDigits reads the span numberAt reads at i as numberAt does, and
// returns where numberAt goes on and the span's digits (0 for a span
// glued to a word).
func spanDigits(s string, i int) (int, int) {
	paren := i > 0 && s[i-1] == '('
	j, d := i, 0
	for n := 1; ; n++ {
		k := j
		for k < len(s) && isDigit(s[k]) {
			k++
		}
		d += k - j
		if k >= len(s) {
			return k + 1, d
		}
		next := k
		switch {
		case n == 1 && paren && s[k] == ')':
			next = k + 1
			if next < len(s) && (s[next] == ' ' || s[next] == '-') {
				next++
			}
		case s[k] == ' ' || s[k] == '-' || s[k] == '.':
			next = k + 1
		default:
			next = len(s)
		}
		if next >= len(s) || !isDigit(s[next]) || n == len(numberSpan{}.groups) {
			j = k
			break
		}
		j = next
	}
	if j < len(s) && (isAlnum(s[j]) || s[j] == '_') {
		for j < len(s) && (isAlnum(s[j]) || s[j] == '_') {
			j++
		}
		return j, 0
	}
	return j + 1, d
}

// classify says what groups [a,b) of a span are.
func classify(s string, sp *numberSpan, a, b int) numberKind {
	digits := 0
	sep := byte(0)
	uniform := true
	for g := a; g < b; g++ {
		digits += sp.groups[g][1] - sp.groups[g][0]
		if g > a {
			if sep == 0 {
				sep = sp.seps[g]
			} else if sp.seps[g] != sep {
				uniform = false
			}
		}
	}
	size := func(g int) int { return sp.groups[g][1] - sp.groups[g][0] }
	// SSN: ddd-dd-dddd or ddd dd dddd, in the issued ranges.
	if b-a == 3 && size(a) == 3 && size(a+1) == 2 && size(a+2) == 4 && uniform && (sep == '-' || sep == ' ') &&
		!(a == 0 && (sp.plus || sp.paren)) && validSSN(s[sp.groups[a][0]:sp.groups[a][1]], s[sp.groups[a+1][0]:sp.groups[a+1][1]], s[sp.groups[a+2][0]:sp.groups[a+2][1]]) {
		return kindSSN
	}
	// Card: 13 to 19 digits, one group or groups of 4 (Amex 4-6-5),
	// spaces or dashes, a known network's prefix and a valid Luhn sum.
	if digits >= 13 && digits <= 19 && (sep == 0 || (uniform && (sep == ' ' || sep == '-'))) && !(a == 0 && (sp.plus || sp.paren)) {
		var buf [19]byte
		n := 0
		for g := a; g < b; g++ {
			n += copy(buf[n:], s[sp.groups[g][0]:sp.groups[g][1]])
		}
		if cardGrouping(sp, a, b, size) && cardPrefix(buf[:n]) && luhn(buf[:n]) {
			return kindCard
		}
	}
	// Phone: NANP (3-3-4, optionally after a 1 or +1, area code maybe in
	// parentheses), or + and 8 to 15 digits in groups.
	nanp := func(x int) bool {
		return b-x == 3 && size(x) == 3 && size(x+1) == 3 && size(x+2) == 4
	}
	switch {
	case a == 0 && sp.plus && digits >= 8 && digits <= 15 && b-a >= 2:
		return kindPhone
	case a == 0 && sp.plus && digits >= 8 && digits <= 15 && b-a == 1:
		return kindPhone
	case nanp(a) && (a > 0 || !sp.plus) && (sep != '.' || uniform) && s[sp.groups[a][0]] >= '2':
		return kindPhone
	case b-a == 4 && size(a) == 1 && s[sp.groups[a][0]] == '1' && nanp(a+1):
		return kindPhone
	}
	return 0
}

func cardGrouping(sp *numberSpan, a, b int, size func(int) int) bool {
	switch b - a {
	case 1:
		return true
	case 3: // Amex 4-6-5
		return size(a) == 4 && size(a+1) == 6 && size(a+2) == 5
	}
	for g := a; g < b-1; g++ {
		if size(g) != 4 {
			return false
		}
	}
	return size(b-1) >= 1 && size(b-1) <= 4
}

func validSSN(area, group, serial string) bool {
	if area == "000" || area == "666" || area[0] == '9' || group == "00" || serial == "0000" {
		return false
	}
	return true
}

// cardPrefix reports whether a number starts like a card of a major
// network: Visa, Mastercard, American Express, Discover, Diners, JCB,
// UnionPay, Maestro.
func cardPrefix(d []byte) bool {
	p := func(n int) int {
		v := 0
		for i := 0; i < n && i < len(d); i++ {
			v = v*10 + int(d[i]-'0')
		}
		return v
	}
	switch {
	case d[0] == '4':
		return true
	case p(2) >= 51 && p(2) <= 55, p(4) >= 2221 && p(4) <= 2720:
		return true
	case p(2) == 34 || p(2) == 37:
		return len(d) == 15
	case p(4) == 6011, p(2) == 65, p(3) >= 644 && p(3) <= 649:
		return true
	case p(2) == 36, p(2) == 38, p(3) >= 300 && p(3) <= 305:
		return true
	case p(4) >= 3528 && p(4) <= 3589:
		return true
	case p(2) == 62:
		return true
	case p(2) == 50, p(2) >= 56 && p(2) <= 58, p(1) == 6:
		return true
	}
	return false
}

func luhn(d []byte) bool {
	sum := 0
	double := false
	for i := len(d) - 1; i >= 0; i-- {
		v := int(d[i] - '0')
		if double {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
		double = !double
	}
	return sum%10 == 0
}

// ---- IP addresses ----

// findIPs finds IPv4 dotted quads (each part 0-255, no leading zeros) and
// IPv6 addresses (as net/netip parses them, with at least two colons).
func findIPs(s string, emit func(int, int)) {
	scanTokens(s, tokIP, 0, func(_ uint8, _ numberKind, a, b int) { emit(a, b) })
}

// ipAt looks for an address starting at i (a hex digit or ':' not within
// a token); colon is the first ':' at or after i, once known (len(s):
// none). It returns where the scan goes on.
func ipAt(s string, i int, colon *int, emit func(int, int)) int {
	c := s[i]
	// IPv4 first: digits and dots only (an address may be followed by
	// :port).
	if isDigit(c) {
		j := i
		dots := 0
		for j < len(s) && (isDigit(s[j]) || s[j] == '.') && j-i < 16 {
			if s[j] == '.' {
				dots++
			}
			j++
		}
		end := j
		for end > i && s[end-1] == '.' {
			end--
			dots--
		}
		if dots == 3 && !glued(s, end) {
			if a, err := netip.ParseAddr(s[i:end]); err == nil && a.Is4() {
				emit(i, end)
				return end
			}
		}
	}
	// IPv6: a hex group must reach a colon soon.
	if *colon < i {
		*colon = strings.IndexByte(s[i:], ':')
		if *colon < 0 {
			*colon = len(s)
		} else {
			*colon += i
		}
	}
	if *colon > i+5 {
		return i + 1
	}
	k := i
	for k < len(s) && k-i < 5 && s[k] != ':' && isIPChar(s[k]) && s[k] != '.' {
		k++
	}
	if k >= len(s) || s[k] != ':' {
		for k < len(s) && isAlnum(s[k]) {
			k++
		}
		return max(k, i+1)
	}
	j := i
	colons, digits := 0, 0
	for j < len(s) && isIPChar(s[j]) && j-i < 45 {
		switch {
		case s[j] == ':':
			colons++
		case isDigit(s[j]):
			digits++
		}
		j++
	}
	end := j
	for end > i && s[end-1] == '.' {
		end--
	}
	if colons >= 2 && digits > 0 && !glued(s, end) {
		if _, err := netip.ParseAddr(s[i:end]); err == nil {
			emit(i, end)
		}
	}
	return max(j, i+1)
}

// glued reports whether what ends at end continues a longer token (a
// version's -beta, a longer dotted number).
func glued(s string, end int) bool {
	return end < len(s) && (isAlnum(s[end]) || s[end] == '-' || s[end] == '_' ||
		(s[end] == '.' && end+1 < len(s) && isDigit(s[end+1])))
}

func isIPChar(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' || c == '.'
}

// ---- street addresses ----

// streetRE is a US-style street address from its number: a house number,
// an optional direction, one to four words, a street type, and optionally
// a unit and ", City, ST 12345".
var streetRE = regexp.MustCompile(`^\d{1,6}[A-Za-z]?\s+(?:(?:[NSEW]\.?|North|South|East|West)\s+)?(?:[A-Z0-9][A-Za-z0-9'.-]*\s+){1,4}(?:Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Court|Ct|Way|Place|Pl|Terrace|Ter|Parkway|Pkwy|Circle|Cir|Highway|Hwy|Square|Sq|Trail|Trl|Alley|Crescent|Close)\b\.?(?:,?\s+(?:Apt|Apartment|Suite|Ste|Unit|#)\.?\s*[A-Za-z0-9-]+)?(?:,\s*[A-Z][A-Za-z]+(?:\s[A-Z][A-Za-z]+){0,2}(?:,\s*[A-Z]{2}(?:\s+\d{5}(?:-\d{4})?)?)?)?`)

// poBoxRE is a post office box.
var poBoxRE = regexp.MustCompile(`^(?i:P\.?\s?O\.?\s+Box|Post\s+Office\s+Box)\s+\d{1,8}`)

func findAddresses(s string, emit func(int, int)) {
	scanTokens(s, tokAddress, 0, func(_ uint8, _ numberKind, a, b int) { emit(a, b) })
}

// addressAt looks for an address starting at i (a digit or P not within
// a word); it returns where the scan goes on.
func addressAt(s string, i int, emit func(int, int)) int {
	c := s[i]
	var loc []int
	window := s[i:min(len(s), i+200)]
	switch {
	case isDigit(c):
		// The cheap test first: digits, a space, a capital or digit.
		k := i
		for k < len(s) && isDigit(s[k]) && k-i < 7 {
			k++
		}
		if k < len(s) && isUpper(s[k]) {
			k++ // 12B
		}
		if k+1 < len(s) && s[k] == ' ' && (isUpper(s[k+1]) || isDigit(s[k+1])) {
			loc = streetRE.FindStringIndex(window)
		}
	case c == 'P' || c == 'p':
		if len(window) > 4 && (window[1] == 'O' || window[1] == 'o' || window[1] == '.') {
			loc = poBoxRE.FindStringIndex(window)
		}
	}
	if loc != nil {
		emit(i, i+loc[1])
		return i + loc[1]
	}
	return i + 1
}

// ---- person names ----

// nameAfterRE is one to three capitalized words (a name after a cue).
var nameAfterRE = regexp.MustCompile(`^[A-Z][a-z]+(?:[-'][A-Z]?[a-z]+)?(?:\s+[A-Z]\.)?(?:\s+[A-Z][a-z]+(?:[-'][A-Z]?[a-z]+)?){0,2}`)

// findNames finds a person's name by its context: an honorific (Mr.,
// Mrs., Ms., Dr., Prof.) or a cue ("my name is", "name:", "signed",
// "regards,") followed by capitalized words, or a common first name
// followed by a capitalized surname.
func findNames(s string, emit func(int, int)) {
	scanTokens(s, tokName, 0, func(_ uint8, _ numberKind, a, b int) { emit(a, b) })
}

// nameAt looks for a name at word s[i:j] (a word's letters, not after an
// apostrophe); it returns where the scan goes on.
func nameAt(s string, i, j int, emit func(int, int)) int {
	c := s[i]
	w := s[i:j]
	start, rest := -1, j
	switch {
	case isUpper(c) && honorific(w):
		if rest < len(s) && s[rest] == '.' {
			rest++
		}
		if rest < len(s) && s[rest] == ' ' {
			start = rest + 1
		}
	case cueShape(w) && cueAt(s, i, j, &rest):
		start = rest
	case isUpper(c) && len(w) > 1 && isLower(w[1]) && j+1 < len(s) && s[j] == ' ' && isUpper(s[j+1]) && firstNames[w]:
		// A known first name and a capitalized next word.
		if loc := nameAfterRE.FindStringIndex(s[i:min(len(s), i+80)]); loc != nil && strings.IndexByte(s[i:i+loc[1]], ' ') > 0 {
			end := trimNonName(s, i, i+loc[1])
			if end > j {
				emit(i, end)
				return end
			}
		}
	}
	if start >= 0 && start < len(s) && isUpper(s[start]) {
		if loc := nameAfterRE.FindStringIndex(s[start:min(len(s), start+80)]); loc != nil {
			end := trimNonName(s, start, start+loc[1])
			if end > start {
				emit(start, end)
				return end
			}
		}
	}
	return j
}

// trimNonName drops trailing words of a match that are common
// capitalized non-names (I, The, And, ...).
func trimNonName(s string, start, end int) int {
	for end > start {
		sp := strings.LastIndexByte(s[start:end], ' ')
		if sp < 0 {
			break
		}
		if !stopWords[strings.TrimSpace(s[start+sp+1:end])] {
			break
		}
		end = start + sp
	}
	if stopWords[s[start:end]] {
		return start
	}
	return end
}

// honorifics are the titles before a name.
var honorifics = []string{"Mr", "Mrs", "Ms", "Mx", "Dr", "Prof", "Sir", "Dame", "Madam"}

func honorific(w string) bool {
	switch w {
	case "Mr", "Mrs", "Ms", "Mx", "Dr", "Prof", "Sir", "Dame", "Madam":
		return true
	}
	return false
}

// cueWords are the words that may start a name's cue (cueAt).
var cueWords = []string{"my", "name", "signed", "regards", "patient", "customer", "employee", "sincerely"}

// cueShape is the cheap first test of a cue word: its length and first
// letter.
func cueShape(w string) bool {
	c := w[0] | 0x20
	switch len(w) {
	case 2:
		return c == 'm'
	case 4:
		return c == 'n'
	case 6:
		return c == 's'
	case 7:
		return c == 'r' || c == 'p'
	case 8:
		return c == 'c' || c == 'e'
	case 9:
		return c == 's'
	}
	return false
}

// What follows each cue word.
var (
	cueMy      = []string{" name is ", " name's ", " full name is "}
	cueName    = []string{": ", " is "}
	cueSigned  = []string{", ", ": ", " "}
	cueClosing = []string{",\n", ", ", ",\r\n"}
	cueRole    = []string{" name: ", ": "}
)

// cueAt reports whether a name cue starts at word s[i:j]; rest is where
// the name would start.
func cueAt(s string, i, j int, rest *int) bool {
	w := s[i:j]
	var tail []string
	// w is ASCII letters: it equals a cue of its length only.
	switch len(w) {
	case 2:
		if strings.EqualFold(w, "my") {
			tail = cueMy
		}
	case 4:
		if strings.EqualFold(w, "name") {
			tail = cueName
		}
	case 6:
		if strings.EqualFold(w, "signed") {
			tail = cueSigned
		}
	case 7:
		if strings.EqualFold(w, "regards") {
			tail = cueClosing
		} else if strings.EqualFold(w, "patient") {
			tail = cueRole
		}
	case 8:
		if strings.EqualFold(w, "customer") || strings.EqualFold(w, "employee") {
			tail = cueRole
		}
	case 9:
		if strings.EqualFold(w, "sincerely") {
			tail = cueClosing
		}
	}
	if tail == nil {
		return false
	}
	for _, t := range tail {
		if len(s)-j >= len(t) && strings.EqualFold(s[j:j+len(t)], t) {
			*rest = j + len(t)
			return true
		}
	}
	return false
}

// ---- prompt injection ----

// injectionPhrases are the phrasings of instruction override, role
// hijacking and system prompt extraction the detector knows, by the
// trigger word they start with: each runs, anchored on a short window, at
// its trigger words only.
var injectionPhrases = func() map[string]*regexp.Regexp {
	const (
		role     = `you\s+are\s+(?:now\s+)?(?:DAN|jailbroken|in\s+developer\s+mode|an?\s+(?:unrestricted|unfiltered|uncensored)\b)`
		from     = `(?:from\s+now\s+on|henceforth),?\s+you\s+(?:are|will|must)\s+(?:no\s+longer|not)\s+(?:bound|restricted|follow)`
		dan      = `do\s+anything\s+now`
		mode     = `(?:enable|enter|activate)\s+(?:developer|god|jailbreak|DAN)\s+mode`
		jail     = `jailbreak(?:ing)?\s+(?:mode|prompt|the\s+model)`
		reveal   = `(?:reveal|print|show|repeat|output|display|leak|dump|tell\s+me)\s+(?:me\s+)?(?:your|the)\s+(?:(?:full|entire|original|hidden|secret|initial)\s+)*(?:system\s+(?:prompt|message|instructions)|initial\s+instructions|hidden\s+instructions|prompt\s+above)`
		pretend  = `(?:pretend|act\s+as\s+if)\s+(?:you\s+(?:are|have)\s+|to\s+be\s+)?(?:an?\s+)?(?:\w+\s+){0,3}(?:with(?:out)?\s+(?:any|no)\s+(?:restrictions|rules|filters|guidelines|limits))`
		newInstr = `new\s+(?:system\s+)?instructions\s*:`
		tag      = `(?:<\|?im_start\|?>\s*system|\[\s*system\s*\]|<\s*/?\s*system\s*>)`
	)
	m := map[string]*regexp.Regexp{}
	add := func(re string, triggers ...string) {
		c := regexp.MustCompile(`^(?i:` + re + `)`)
		for _, t := range triggers {
			m[t] = c
		}
	}
	add(role, "you")
	add(from, "from", "henceforth")
	add(dan, "do")
	add(mode, "enable", "enter", "activate")
	add(jail, "jailbreak", "jailbreaking")
	add(reveal, "reveal", "print", "show", "repeat", "output", "display", "leak", "dump", "tell")
	add(pretend, "pretend", "act")
	add(newInstr, "new")
	add(tag, "<", "[")
	return m
}()

// findInjections finds injection phrasings, starting at their trigger
// words.
func findInjections(s string, emit func(int, int)) {
	scanTokens(s, tokInjection|tokTag, 0, func(_ uint8, _ numberKind, a, b int) { emit(a, b) })
}

// tagAt looks for a role tag starting at i (a '<' or '['); it returns
// where the scan goes on.
func tagAt(s string, i int, emit func(int, int)) int {
	if loc := injectionPhrases[s[i:i+1]].FindStringIndex(s[i:min(len(s), i+40)]); loc != nil {
		emit(i, i+loc[1])
		return i + loc[1]
	}
	return i + 1
}

// injectionAt looks for a phrasing starting at word s[i:j] (a word's
// letters); it returns where the scan goes on.
func injectionAt(s string, i, j int, emit func(int, int)) int {
	if !maybeTrigger(s[i:j]) {
		return j
	}
	// One lookup says whether the word is a verb or a trigger.
	info := lookupWord(s, i, j)
	if info.verb {
		if end := overrideAt(s, j); end > 0 {
			emit(i, end)
			return end
		}
	} else if re := injectionTrigger(s, i, j, info); re != nil {
		if loc := re.FindStringIndex(s[i:min(len(s), i+240)]); loc != nil {
			emit(i, i+loc[1])
			return i + loc[1]
		}
	}
	return j
}

// The instruction override ("ignore all previous instructions") is
// matched by hand: a verb, up to four filler words, an object. As a
// regular expression its alternations make Go's matcher fall back to its
// slowest engine.
var (
	overrideVerbs   = setOf("ignore", "disregard", "forget", "skip", "override", "bypass", "drop")
	overrideFillers = setOf("all", "any", "every", "of", "the", "your", "my", "these", "those", "previous", "prior",
		"above", "earlier", "preceding", "foregoing", "existing", "original", "initial", "system", "developer", "safety", "and")
	overrideObjects = setOf("instruction", "instructions", "prompt", "prompts", "rules", "directions", "directives",
		"guidelines", "guardrails", "restrictions", "context", "programming", "constraints", "policies")
)

// triggerShape holds the (length, first letter, second letter) of every
// trigger word: a word of another shape is none, without a map lookup.
var triggerShape = func() (t [17][26][26]bool) {
	add := func(w string) { t[len(w)][w[0]-'a'][w[1]-'a'] = true }
	for w := range overrideVerbs {
		add(w)
	}
	for w := range nextWords {
		add(w)
	}
	return t
}()

// maybeTrigger is the cheap first test of a word.
func maybeTrigger(w string) bool {
	if len(w) < 2 || len(w) >= len(triggerShape) {
		return false
	}
	return triggerShape[len(w)][w[0]|0x20-'a'][w[1]|0x20-'a']
}

// overrideAt matches the rest of an override after its verb ending at j:
// the end of the match, or -1.
func overrideAt(s string, j int) int {
	pos := j
	for n := 0; n <= 4; n++ {
		k := pos
		for k < len(s) && (s[k] == ' ' || s[k] == '\t' || s[k] == '\n') {
			k++
		}
		if k == pos {
			return -1
		}
		e := k
		for e < len(s) && (isUpper(s[e]) || isLower(s[e])) {
			e++
		}
		info := lookupWord(s, k, e)
		if info.object {
			return e
		}
		if !info.filler {
			return -1
		}
		pos = e
	}
	return -1
}

// nextWords gate a trigger word: the phrases' regular expression runs
// only when the next word is one of these (nil: any word).
var nextWords = map[string]map[string]bool{
	"you": setOf("are"), "from": setOf("now"), "henceforth": nil, "do": setOf("anything"),
	"enable": setOf("developer", "god", "jailbreak", "dan"), "enter": setOf("developer", "god", "jailbreak", "dan"),
	"activate": setOf("developer", "god", "jailbreak", "dan"), "jailbreak": nil, "jailbreaking": nil,
	"reveal": setOf("me", "your", "the"), "print": setOf("me", "your", "the"), "show": setOf("me", "your", "the"),
	"repeat": setOf("me", "your", "the"), "output": setOf("me", "your", "the"), "display": setOf("me", "your", "the"),
	"leak": setOf("me", "your", "the"), "dump": setOf("me", "your", "the"), "tell": setOf("me"),
	"pretend": nil, "act": setOf("as"), "new": setOf("instructions", "system"),
}

// injectionTrigger is the phrases' expression when s[i:j] is a trigger
// word (any case; info is its lookupWord) followed by a word its phrases
// allow, or nil.
func injectionTrigger(s string, i, j int, info *wordInfo) *regexp.Regexp {
	w := s[i:j]
	if len(w) < 2 || len(w) > 12 || j >= len(s) || (s[j] != ' ' && s[j] != '\n' && s[j] != '\t') {
		return nil
	}
	if info.trigger == nil {
		return nil
	}
	re := info.trigger
	if info.after < 0 {
		return re
	}
	k := j
	for k < len(s) && (s[k] == ' ' || s[k] == '\n' || s[k] == '\t') {
		k++
	}
	e := k
	for e < len(s) && (isUpper(s[e]) || isLower(s[e])) {
		e++
	}
	if lookupWord(s, k, e).follows&(1<<info.after) != 0 {
		return re
	}
	return nil
}

// wordInfo is what the injection detector knows of a word (lowercase):
// an override's verb, filler or object, a trigger word (its phrases'
// expression, and the index of the set of words that may follow it; -1:
// any), and the sets of words following a trigger it is in (a bit per
// set).
type wordInfo struct {
	word                 string
	lo, hi               uint64 // word, packed (packWord)
	verb, filler, object bool
	trigger              *regexp.Regexp
	after                int
	follows              uint32
}

// words holds the injection detector's words by a hash of their packed
// bytes, open addressing: a lookup loads, lowers and hashes a word in a
// few instructions and compares two words of memory, where a map of
// each set cost a lookup each.
var words = func() (t [256]wordInfo) {
	at := func(w string) *wordInfo {
		lo, hi := packWord(w, 0, len(w))
		for h := wordSlot(lo, hi); ; h++ {
			e := &t[h%uint32(len(t))]
			if e.word == "" {
				e.word, e.lo, e.hi, e.after = w, lo, hi, -1
			}
			if e.word == w {
				return e
			}
		}
	}
	for w := range overrideVerbs {
		at(w).verb = true
	}
	for w := range overrideFillers {
		at(w).filler = true
	}
	for w := range overrideObjects {
		at(w).object = true
	}
	// The sets of following words, numbered in the triggers' order.
	triggers := slices.Sorted(maps.Keys(nextWords))
	var sets []map[string]bool
	for _, w := range triggers {
		e := at(w)
		e.trigger = injectionPhrases[w]
		next := nextWords[w]
		if next == nil {
			continue
		}
		e.after = slices.IndexFunc(sets, func(m map[string]bool) bool { return maps.Equal(m, next) })
		if e.after < 0 {
			e.after = len(sets)
			sets = append(sets, next)
		}
		for n := range next {
			at(n).follows |= 1 << e.after
		}
	}
	return t
}()

// packWord is s[i:j] (ASCII letters, at most 16), lowered, as two
// little-endian words, the bytes past its end zero: a word's bytes are
// none zero, so the two words are the word. Two loads where s has
// sixteen bytes from i, else byte by byte.
func packWord(s string, i, j int) (lo, hi uint64) {
	n := j - i
	if i+16 <= len(s) {
		lo, hi = load64(s, i)|0x2020202020202020, load64(s, i+8)|0x2020202020202020
		if n < 8 {
			return lo & (1<<(8*n) - 1), 0
		}
		return lo, hi & (1<<(8*(n-8)) - 1) // n 16: all of hi (a shift by 64 is 0)
	}
	for k := n - 1; k >= 0; k-- {
		c := uint64(s[i+k] | 0x20)
		if k < 8 {
			lo = lo<<8 | c
		} else {
			hi = hi<<8 | c
		}
	}
	return lo, hi
}

// wordSlot is a packed word's place in words.
func wordSlot(lo, hi uint64) uint32 {
	return uint32((lo*0x9E3779B97F4A7C15 ^ hi*0xC2B2AE3D27D4EB4F) >> 56)
}

// unknownWord is the info of a word the detector does not know.
var unknownWord = wordInfo{after: -1}

// lookupWord is the info of the word s[i:j] (ASCII letters, any case).
func lookupWord(s string, i, j int) *wordInfo {
	if j-i > 16 {
		return &unknownWord
	}
	lo, hi := packWord(s, i, j)
	for h := wordSlot(lo, hi); ; h++ {
		e := &words[h%uint32(len(words))]
		if e.word == "" {
			return &unknownWord
		}
		if e.lo == lo && e.hi == hi {
			return e
		}
	}
}
