// Package pdftext extracts the text layer of a PDF, for the gateway's
// file-parser plugin: the pages' text in reading order as the PDF's
// content streams show it, with the document's limits checked first.
//
// The parsing is github.com/ledongthuc/pdf (the maintained descendant of
// rsc.io/pdf, which decodes fonts' ToUnicode maps and standard
// encodings); a panic inside it on a malformed file is a malformed PDF,
// never a crash.
package pdftext

import (
	"bytes"
	"errors"
	"fmt"
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
)

// Document is the text of a PDF.
type Document struct {
	Pages int
	// Text is every page's text, pages apart by a blank line, as valid
	// UTF-8 without control characters other than newlines and tabs.
	Text string
}

// Extract reads the text of the PDF data, refusing one of more than
// maxPages pages (checked before any page is read) and one whose pages
// hold no text.
func Extract(data []byte, maxPages int) (doc Document, err error) {
	if !bytes.HasPrefix(bytes.TrimLeft(data, "\x00\t\n\f\r "), []byte("%PDF-")) {
		return Document{}, fmt.Errorf("%w: no %%PDF- header", ErrMalformed)
	}
	defer func() {
		if x := recover(); x != nil {
			doc, err = Document{}, fmt.Errorf("%w: %v", ErrMalformed, x)
		}
	}()
	r, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return Document{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	n := r.NumPage()
	switch {
	case n <= 0:
		return Document{}, fmt.Errorf("%w: no pages", ErrMalformed)
	case n > maxPages:
		return Document{}, fmt.Errorf("%w: %d pages, more than %d", ErrTooManyPages, n, maxPages)
	}
	fonts := map[string]*pdf.Font{}
	var b strings.Builder
	for i := 1; i <= n; i++ {
		p := r.Page(i)
		if p.V.IsNull() {
			return Document{}, fmt.Errorf("%w: page %d is missing", ErrMalformed, i)
		}
		for _, name := range p.Fonts() {
			if _, ok := fonts[name]; !ok {
				f := p.Font(name)
				fonts[name] = &f
			}
		}
		text, err := p.GetPlainText(fonts)
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
	}
	if b.Len() == 0 {
		return Document{}, ErrNoText
	}
	return Document{Pages: n, Text: b.String()}, nil
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
