// Package pdftext extracts the text layer of a PDF, for the gateway's
// file-parser plugin: the pages' text in reading order as the PDF's
// content streams show it, with the document's limits checked first.
//
// The parsing is github.com/ledongthuc/pdf (the maintained descendant of
// rsc.io/pdf, which decodes fonts' ToUnicode maps and standard
// encodings). It trusts the file: a panic inside it on a malformed file
// is a malformed PDF, never a crash; its reads of the file are budgeted
// in bytes and in reads, and the page tree is walked here with bounds on
// the objects it visits, so that links that loop end the parse instead
// of running it for seconds or forever; the pages' content is measured
// before it is decompressed whole; and a parse stops when its request
// ends.
package pdftext

import (
	"bytes"
	"context"
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

// The parser reads an object from the file at each use (a 4 KiB chunk at
// a time, and the whole object however large) and follows the file's
// links without remembering them: a cross-reference chain or a page tree
// that loops would have it read forever, and an object of megabytes that
// is used again and again (a page tree node listing itself a million
// times) costs a parse of megabytes at each use. A parse is bounded by
// the bytes it reads, which is what its CPU follows, and by reads.
//
// readBudget is how many reads a parse of a PDF of size bytes may make,
// and byteBudget how many bytes (the parser lexes about 10 MB a second):
// a legitimate file reads far fewer (a 100-page document of 120 KB makes
// about 800 reads of 1.8 MB; a large one reads its pages' content twice,
// to measure it and to show it).
func readBudget(size int) int64 { return 20_000 + int64(size)/256 }
func byteBudget(size int) int64 { return 8<<20 + 2*int64(size) }

// budgetReader is the file as the parser reads it, failing (so that the
// parse stops, with a malformed PDF) once the budget of reads or bytes
// is spent, or once ctx ends.
type budgetReader struct {
	r           *bytes.Reader
	left, bytes int64
	ctx         context.Context
}

func (b *budgetReader) ReadAt(p []byte, off int64) (int, error) {
	if b.left <= 0 || b.bytes <= 0 {
		return 0, errBudget
	}
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	b.left--
	short := int64(len(p)) > b.bytes
	if short {
		p = p[:b.bytes]
	}
	n, err := b.r.ReadAt(p, off)
	b.bytes -= int64(n)
	if short && err == nil {
		err = errBudget
	}
	return n, err
}

// Document is the text of a PDF.
type Document struct {
	Pages int
	// Content is what the pages' content streams decompressed to.
	Content int64
	// Read is what the parser read of the file (its objects, read at
	// each use), set on a refusal too.
	Read int64
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
	// Read bounds what the parser reads of the file, its objects read at
	// each use (byteBudget's when lower; 0: byteBudget's).
	Read int64
}

// Extract reads the text of the PDF data, refusing one beyond the limits
// and one whose pages hold no text.
func Extract(data []byte, lim Limits) (Document, error) {
	return ExtractContext(context.Background(), data, lim)
}

// ExtractContext is Extract for a request: the parse stops, with ctx's
// error, once ctx ends (the client left).
func ExtractContext(ctx context.Context, data []byte, lim Limits) (doc Document, err error) {
	if !bytes.HasPrefix(bytes.TrimLeft(data, "\x00\t\n\f\r "), []byte("%PDF-")) {
		return Document{}, fmt.Errorf("%w: no %%PDF- header", ErrMalformed)
	}
	read := byteBudget(len(data))
	if lim.Read > 0 {
		read = min(read, lim.Read)
	}
	br := &budgetReader{r: bytes.NewReader(data), left: readBudget(len(data)), bytes: read, ctx: ctx}
	defer func() {
		if x := recover(); x != nil {
			doc, err = Document{}, fmt.Errorf("%w: %v", ErrMalformed, x)
		}
		if ctx.Err() != nil {
			doc, err = Document{}, ctx.Err()
		}
		doc.Read = read - br.bytes
	}()
	r, err := pdf.NewReader(br, int64(len(data)))
	if err != nil {
		return Document{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	// The root of the page tree, resolved (parsed) once.
	root := r.Trailer().Key("Root").Key("Pages")
	n := int(root.Key("Count").Int64())
	switch {
	case n <= 0:
		return Document{}, fmt.Errorf("%w: no pages", ErrMalformed)
	case n > lim.Pages:
		return Document{}, fmt.Errorf("%w: %d pages, more than %d", ErrTooManyPages, n, lim.Pages)
	}
	pages, err := pageList(root, n)
	if err != nil {
		return Document{}, err
	}
	var b strings.Builder
	content := lim.Content // what the pages' content may still decompress to
	for i, p := range pages {
		if err := ctx.Err(); err != nil {
			return Document{}, err
		}
		// The parser decompresses a page's content whole: measured
		// first, within what is left.
		if content -= streamSize(p.V.Key("Contents"), content); content < 0 {
			return Document{}, fmt.Errorf("%w: the content of its pages decompresses to more than %d bytes", ErrTooLarge, lim.Content)
		}
		// The page's own fonts: two pages may give one name to two fonts.
		text, err := p.GetPlainText(nil)
		if err != nil {
			return Document{}, fmt.Errorf("%w: page %d: %v", ErrMalformed, i+1, err)
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

// Bounds of the page tree's walk: a tree of n pages needs at most n
// leaves and fewer inner nodes, a few levels deep.
const (
	maxTreeDepth = 32
	// extraNodes are the inner nodes a tree of n pages may hold beyond
	// n (empty Pages nodes, one-child chains).
	extraNodes = 64
)

// pageList walks the page tree from root, in order, and returns its n
// pages. The parser's own walk (Reader.Page) follows each node's Kids
// and Count as they say, from the root again for every page: a node
// listed among its own descendants would send it round forever. This
// walk visits at most 2n+extraNodes nodes, maxTreeDepth levels deep, and
// a node's Kids at most n entries, so a tree that loops is refused after
// a few hundred objects, as is a page whose Parent chain (where its
// inherited resources are looked up) loops.
func pageList(root pdf.Value, n int) ([]pdf.Page, error) {
	var pages []pdf.Page
	visits := 0
	var walk func(node pdf.Value, depth int) error
	walk = func(node pdf.Value, depth int) error {
		if visits++; visits > 2*n+extraNodes || depth > maxTreeDepth {
			return fmt.Errorf("%w: its page tree loops or holds more nodes than its %d pages", ErrMalformed, n)
		}
		switch node.Key("Type").Name() {
		case "Pages":
			kids := node.Key("Kids")
			if kids.Len() > n {
				return fmt.Errorf("%w: a node of its page tree lists %d kids, more than its %d pages", ErrMalformed, kids.Len(), n)
			}
			for i := range kids.Len() {
				if err := walk(kids.Index(i), depth+1); err != nil {
					return err
				}
			}
		case "Page":
			if len(pages) == n {
				return fmt.Errorf("%w: its page tree holds more pages than its count, %d", ErrMalformed, n)
			}
			up := node
			for range maxTreeDepth + 1 {
				if up = up.Key("Parent"); up.IsNull() {
					pages = append(pages, pdf.Page{V: node})
					return nil
				}
			}
			return fmt.Errorf("%w: page %d's parents loop", ErrMalformed, len(pages)+1)
		}
		return nil
	}
	if err := walk(root, 0); err != nil {
		return nil, err
	}
	if len(pages) < n {
		return nil, fmt.Errorf("%w: page %d is missing", ErrMalformed, len(pages)+1)
	}
	return pages, nil
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
