package websearch

import (
	"net/url"
	"strings"
	"unicode/utf8"
)

// Result is one search result as given to the model. Its fields match
// engines.Result, so a conversion websearch.Result(r) works.
type Result struct {
	Title   string
	URL     string
	Snippet string
	// PublishedDate is shown to the model when set.
	PublishedDate string
}

// Source is a search result as seen by the annotator: [n] refers to
// sources[n-1], the numbering of SystemMessage.
type Source = Result

// Annotation is a url_citation annotation of an output_text part.
//
// StartIndex and EndIndex count Unicode code points (as Python and OpenAI
// index strings; not bytes, not UTF-16 units) from the start of the part's
// text; an invalid UTF-8 byte counts as one code point. The span
// [StartIndex, EndIndex) is the whole markdown link "[title](url)", or the
// whole "[n]" for a numbered reference, following OpenAI's convention.
type Annotation struct {
	Type       string `json:"type"`
	URL        string `json:"url"`
	Title      string `json:"title"`
	StartIndex int    `json:"start_index"`
	EndIndex   int    `json:"end_index"`
	Content    string `json:"content,omitempty"`
}

// Bounds on what is taken for a link, so a stray "[" cannot make the
// streamer hold back an unbounded amount of text.
const (
	maxLinkText  = 1000
	maxLinkURL   = 4096
	maxLinkTitle = 1000
)

// Annotate returns the url_citation annotations of text, in text order:
//
//   - every inline markdown link [text](url) or [text](<url> "title") whose
//     url is http(s); brackets may nest in the text and parentheses may nest
//     in the url. Images ![..](..) and links preceded by a backslash are
//     skipped; as in CommonMark, a link inside another link's text makes the
//     inner one the link; link text may not span lines;
//   - every bare "[n]" (n = 1..len(sources), not preceded by a letter,
//     digit or '_', not followed by "(" or ":") citing sources[n-1].
//
// URL and Title come from the matching source when the link's url matches
// one (ignoring scheme, "www.", a trailing "/" and the fragment); otherwise
// URL is the link's url and Title its text. Content is the matching
// source's snippet, if any. Markdown code spans are not recognised.
func Annotate(text string, sources []Source) []Annotation {
	s := NewStreamer(sources)
	s.buf = text
	out := s.scan(true)
	if out == nil {
		out = []Annotation{}
	}
	return out
}

// Streamer annotates text that arrives in deltas, emitting each annotation
// as soon as the text that decides it has arrived (a link at its closing
// ")", a "[n]" at the character after it), with the indices Annotate gives
// on the whole text. Text not part of a possible link is released at once,
// so memory stays bounded by the link size limits.
type Streamer struct {
	byURL   map[string]int
	sources []Source
	buf     string // undecided text, starting base code points into the part
	base    int
	prev    byte // last byte before buf; 0 at the start of the text
}

// NewStreamer returns a Streamer for one output_text part.
func NewStreamer(sources []Source) *Streamer {
	s := &Streamer{sources: sources, byURL: map[string]int{}}
	for i, src := range sources {
		k := urlKey(src.URL)
		if _, dup := s.byURL[k]; !dup {
			s.byURL[k] = i
		}
	}
	return s
}

// Feed takes the next delta and returns the annotations it completes.
func (s *Streamer) Feed(delta string) []Annotation {
	s.buf += delta
	return s.scan(false)
}

// Flush ends the text and returns the annotations still pending (a "[n]"
// at the very end). The Streamer must not be fed afterwards.
func (s *Streamer) Flush() []Annotation {
	return s.scan(true)
}

type linkKind int

const (
	needMore   linkKind = iota
	notLink             // "[" starts nothing; scan on from the next byte
	skipLink            // a link that cites nothing (image, non-http url)
	citeLink            // a link citing url
	citeNumber          // a [n] citing sources[n-1]
)

// scan decides as much of buf as it can. Without final, any decision that
// would need a byte past the end of buf is postponed (needMore), so each
// decision depends only on bytes that Annotate sees too: that is what makes
// streamed and whole-text indices equal.
func (s *Streamer) scan(final bool) []Annotation {
	var out []Annotation
	pos := 0
	counted, runes := 0, s.base // code points before buf[counted]
	for {
		i := strings.IndexByte(s.buf[pos:], '[')
		if i < 0 {
			if final {
				s.commit(len(s.buf))
			} else {
				s.commit(safeCut(s.buf))
			}
			return out
		}
		i += pos
		kind, end, num, target, text := s.parseAt(i, final, false)
		switch kind {
		case needMore:
			s.commit(i)
			return out
		case notLink:
			pos = i + 1
			continue
		case skipLink:
			pos = end
			continue
		}
		// '[' and the closing ASCII byte sit on code point boundaries, so
		// counting piecewise gives the whole-text count.
		runes += utf8.RuneCountInString(s.buf[counted:i])
		start := runes
		runes += utf8.RuneCountInString(s.buf[i:end])
		counted, pos = end, end
		a := Annotation{Type: "url_citation", StartIndex: start, EndIndex: runes}
		if kind == citeNumber {
			src := s.sources[num]
			a.URL, a.Title, a.Content = src.URL, src.Title, src.Snippet
		} else if n, ok := s.byURL[urlKey(target)]; ok {
			src := s.sources[n]
			a.URL, a.Title, a.Content = src.URL, src.Title, src.Snippet
		} else {
			a.URL, a.Title = target, strings.TrimSpace(text)
			if a.Title == "" {
				a.Title = target
			}
		}
		out = append(out, a)
	}
}

// commit releases buf[:p], which must end on a code point boundary.
func (s *Streamer) commit(p int) {
	if p == 0 {
		return
	}
	s.base += utf8.RuneCountInString(s.buf[:p])
	s.prev = s.buf[p-1]
	s.buf = s.buf[p:]
}

// safeCut is the longest prefix of b that does not end in a truncated UTF-8
// sequence, whose next bytes may still arrive.
func safeCut(b string) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRuneInString(b[i:]) {
				return len(b)
			}
			return i
		}
	}
	return len(b)
}

// parseAt parses what starts at the '[' at buf[i]: a link to target with
// the given text, or a reference to sources[num], ending before buf[end].
func (s *Streamer) parseAt(i int, final, inner bool) (kind linkKind, end, num int, target, text string) {
	b := s.buf
	more := func() (linkKind, int, int, string, string) {
		if final {
			return notLink, 0, 0, "", ""
		}
		return needMore, 0, 0, "", ""
	}
	prev := s.prev
	if i > 0 {
		prev = b[i-1]
	}
	if prev == '\\' {
		return notLink, 0, 0, "", ""
	}

	// Link text: balanced brackets, backslash escapes, one line.
	j, depth := i+1, 1
	for {
		if j-i > maxLinkText {
			return notLink, 0, 0, "", ""
		}
		if j >= len(b) {
			return more()
		}
		c := b[j]
		if c == '\\' {
			j += 2
			continue
		}
		if c == '\n' {
			return notLink, 0, 0, "", ""
		}
		if c == '[' {
			depth++
		} else if c == ']' {
			if depth--; depth == 0 {
				break
			}
		}
		j++
	}
	text = b[i+1 : j]
	k := j + 1
	if k >= len(b) && !final {
		return needMore, 0, 0, "", ""
	}
	if k >= len(b) || b[k] != '(' {
		if n, ok := s.number(text, prev, b, k); ok {
			return citeNumber, k, n, "", text
		}
		return notLink, 0, 0, "", ""
	}

	// Destination: <...> or a run of non-space bytes with balanced parens.
	d := k + 1
	skipSpace := func() bool {
		for d < len(b) && (b[d] == ' ' || b[d] == '\t') && d-k <= maxLinkURL {
			d++
		}
		return d < len(b)
	}
	if !skipSpace() {
		return more()
	}
	var dest string
	if b[d] == '<' {
		e := d + 1
		for ; ; e++ {
			if e-d > maxLinkURL {
				return notLink, 0, 0, "", ""
			}
			if e >= len(b) {
				return more()
			}
			if b[e] == '>' {
				break
			}
			if b[e] == '<' || b[e] == '\n' {
				return notLink, 0, 0, "", ""
			}
		}
		dest, d = b[d+1:e], e+1
	} else {
		start, pd := d, 0
		for ; ; d++ {
			if d-start > maxLinkURL {
				return notLink, 0, 0, "", ""
			}
			if d >= len(b) {
				return more()
			}
			c := b[d]
			if c == '\\' {
				d++
				continue
			}
			if c == '(' {
				pd++
			} else if c == ')' {
				if pd == 0 {
					break
				}
				pd--
			} else if c <= ' ' || c == 0x7f {
				break
			}
		}
		if pd != 0 {
			return notLink, 0, 0, "", ""
		}
		dest = b[start:d]
	}
	if !skipSpace() {
		return more()
	}
	if c := b[d]; c == '"' || c == '\'' || c == '(' {
		closer := c
		if c == '(' {
			closer = ')'
		}
		t := d + 1
		for ; ; t++ {
			if t-d > maxLinkTitle {
				return notLink, 0, 0, "", ""
			}
			if t >= len(b) {
				return more()
			}
			if b[t] == '\\' {
				t++
				continue
			}
			if b[t] == closer {
				break
			}
		}
		d = t + 1
		if !skipSpace() {
			return more()
		}
	}
	if b[d] != ')' {
		return notLink, 0, 0, "", ""
	}
	end = d + 1
	if !inner && containsLink(text) { // CommonMark: the inner link wins
		return notLink, 0, 0, "", ""
	}
	dest = unescape(dest)
	if prev == '!' || !isHTTP(dest) {
		return skipLink, end, 0, "", ""
	}
	return citeLink, end, 0, dest, text
}

// number recognises text as a numbered reference "[n]" to a source; b[k]
// (when k < len(b)) is the byte after the "]".
func (s *Streamer) number(text string, prev byte, b string, k int) (int, bool) {
	if len(text) == 0 || len(text) > 3 || isWordByte(prev) || prev == '!' {
		return 0, false
	}
	if k < len(b) && (b[k] == '(' || b[k] == ':') {
		return 0, false
	}
	n := 0
	for i := 0; i < len(text); i++ {
		if text[i] < '0' || text[i] > '9' {
			return 0, false
		}
		n = n*10 + int(text[i]-'0')
	}
	if n < 1 || n > len(s.sources) {
		return 0, false
	}
	return n - 1, true
}

// containsLink reports whether link text holds a link (an image is fine:
// [![badge](img)](url) is a link). Any link-shaped span counts, whatever it
// holds itself, since its innermost link would then be a link in text: this
// keeps the check linear in nesting depth.
func containsLink(text string) bool {
	if !strings.Contains(text, "](") {
		return false
	}
	t := &Streamer{buf: text}
	for i := 0; i < len(text); i++ {
		if text[i] != '[' || i > 0 && text[i-1] == '!' {
			continue
		}
		if kind, _, _, _, _ := t.parseAt(i, true, true); kind == citeLink || kind == skipLink {
			return true
		}
	}
	return false
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

func isHTTP(u string) bool {
	l := strings.ToLower(u)
	return strings.HasPrefix(l, "https://") || strings.HasPrefix(l, "http://")
}

// unescape drops markdown's backslash before ASCII punctuation.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", s[i+1]) >= 0 {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// urlKey is the form in which a cited url is matched against the sources:
// models often change the scheme, add or drop "www." or a trailing "/", or
// append a fragment.
func urlKey(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return strings.TrimSpace(raw)
	}
	host := strings.TrimPrefix(strings.ToLower(u.Host), "www.")
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	k := host + path
	if u.RawQuery != "" {
		k += "?" + u.RawQuery
	}
	return k
}
