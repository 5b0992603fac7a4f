// Package pdftext extracts the text layer of a PDF, for the gateway's
// file-parser plugin: the pages' text in reading order as the PDF's
// content streams show it, with the document's limits checked first.
//
// The parsing is github.com/ledongthuc/pdf (the maintained descendant of
// rsc.io/pdf, which decodes fonts' ToUnicode maps and standard
// encodings). It trusts the file: a panic inside it on a malformed file
// is a malformed PDF, never a crash; its reads of the file are budgeted,
// so that links that loop end the parse instead of running it forever;
// and the pages' content is measured before it is decompressed whole.
package pdftext

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ledongthuc/pdf"
)

// Errors of Extract; a caller names the file it refuses.
var (
	// ErrMalformed: not a PDF, or one the parser cannot read (damaged,
	// encrypted).
	ErrMalformed = errors.New("malformed PDF")
	// ErrTooManyPages: more pages than the limit.
	ErrTooManyPages = errors.New("too many pages")
	// ErrNoText: no page holds text, as in a scanned document (images of
	// pages without a text layer).
	ErrNoText = errors.New("no text layer")
	// ErrTooLarge: the pages' content decompresses to more than the
	// limit, or their text is longer than it.
	ErrTooLarge = errors.New("too large")
)

// errBudget ends a parse that read more than its budget.
var errBudget = errors.New("the PDF's structure loops or is too complex")

// readBudget is how many reads a parse of a PDF of size bytes may make.
// The parser reads an object from the file at each use (a 4 KiB chunk)
// and follows the file's links without remembering them: a
// cross-reference chain or a page tree that loops would have it read
// forever. A legitimate file makes far fewer (the 100-page test document
// about 6,000).
func readBudget(size int) int64 { return 50_000 + int64(size)/256 }

// budgetReader is the file as the parser reads it, failing (so that the
// parse stops, with a malformed PDF) once the budget of reads is spent.
type budgetReader struct {
	r    *bytes.Reader
	left int64
}

func (b *budgetReader) ReadAt(p []byte, off int64) (int, error) {
	if b.left <= 0 {
		return 0, errBudget
	}
	b.left--
	return b.r.ReadAt(p, off)
}

// Document is the text of a PDF.
type Document struct {
	Pages int
	// Content is what the pages' content streams decompressed to.
	Content int64
	// Text is every page's text, pages apart by a blank line, as valid
	// UTF-8 without control characters other than newlines and tabs.
	Text string
}

// Limits bound what Extract reads.
type Limits struct {
	Pages int // pages, checked before any page is read
	// Content bounds what the pages' content streams decompress to, in
	// all (a compression bomb), and Text the text extracted.
	Content, Text int64
}

// Extract reads the text of the PDF data, refusing one beyond the limits
// and one whose pages hold no text.
func Extract(data []byte, lim Limits) (doc Document, err error) {
	if !bytes.HasPrefix(bytes.TrimLeft(data, "\x00\t\n\f\r "), []byte("%PDF-")) {
		return Document{}, fmt.Errorf("%w: no %%PDF- header", ErrMalformed)
	}
	defer func() {
		if x := recover(); x != nil {
			doc, err = Document{}, fmt.Errorf("%w: %v", ErrMalformed, x)
		}
	}()
	r, err := pdf.NewReader(&budgetReader{r: bytes.NewReader(data), left: readBudget(len(data))}, int64(len(data)))
	if err != nil {
		return Document{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	n := r.NumPage()
	switch {
	case n <= 0:
		return Document{}, fmt.Errorf("%w: no pages", ErrMalformed)
	case n > lim.Pages:
		return Document{}, fmt.Errorf("%w: %d pages, more than %d", ErrTooManyPages, n, lim.Pages)
	}
	var b strings.Builder
	content := lim.Content // what the pages' content may still decompress to
	for i := 1; i <= n; i++ {
		p := r.Page(i)
		if p.V.IsNull() {
			return Document{}, fmt.Errorf("%w: page %d is missing", ErrMalformed, i)
		}
		// The parser decompresses a page's content whole: measured
		// first, within what is left.
		if content -= streamSize(p.V.Key("Contents"), content); content < 0 {
			return Document{}, fmt.Errorf("%w: the content of its pages decompresses to more than %d bytes", ErrTooLarge, lim.Content)
		}
		// The page's own fonts: two pages may give one name to two fonts.
		text, err := p.GetPlainText(nil)
		if err != nil {
			return Document{}, fmt.Errorf("%w: page %d: %v", ErrMalformed, i, err)
		}
		text = clean(text)
		if text == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(text)
		if int64(b.Len()) > lim.Text {
			return Document{}, fmt.Errorf("%w: its text is longer than %d bytes", ErrTooLarge, lim.Text)
		}
	}
	if b.Len() == 0 {
		return Document{}, ErrNoText
	}
	return Document{Pages: n, Content: lim.Content - content, Text: b.String()}, nil
}

// streamSize is the decompressed size of a page's content (a stream or an
// array of streams), read up to limit+1 bytes.
func streamSize(v pdf.Value, limit int64) int64 {
	switch v.Kind() {
	case pdf.Stream:
		n, _ := io.Copy(io.Discard, io.LimitReader(v.Reader(), limit+1))
		return n
	case pdf.Array:
		var total int64
		for i := 0; i < v.Len() && total <= limit; i++ {
			total += streamSize(v.Index(i), limit-total)
		}
		return total
	}
	return 0
}

// clean makes a page's text valid UTF-8 without control characters (a
// font without a Unicode map shows its raw codes), with trailing spaces
// and runs of blank lines trimmed.
func clean(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return r
		case r == '\r':
			return '\n'
		case unicode.IsControl(r) || r == utf8.RuneError:
			return -1
		}
		return r
	}, s)
	lines := strings.Split(s, "\n")
	out := lines[:0]
	for _, l := range lines {
		l = strings.TrimRight(l, " \t")
		if l == "" && (len(out) == 0 || out[len(out)-1] == "") {
			continue
		}
		out = append(out, l)
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}
