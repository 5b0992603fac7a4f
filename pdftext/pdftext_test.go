package pdftext

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/pdftext/pdftest"
)

var testLimits = Limits{Pages: 100, Content: 1 << 20, Text: 1 << 20}

func TestExtract(t *testing.T) {
	doc, err := Extract(pdftest.Build("Quarterly report (draft)\nRevenue grew 12%.", "", "Page three: caf\xe9 costs"), testLimits)
	if err != nil {
		t.Fatal(err)
	}
	// The scanned middle page adds nothing; WinAnsi 0xE9 is é.
	want := "Quarterly report (draft)\nRevenue grew 12%.\n\nPage three: café costs"
	if doc.Pages != 3 || doc.Text != want {
		t.Fatalf("got %d pages, %q", doc.Pages, doc.Text)
	}
}

func TestExtractRefusals(t *testing.T) {
	valid := pdftest.Build("one", "two", "three")
	for name, tc := range map[string]struct {
		data []byte
		want error
	}{
		"not a PDF":            {[]byte("hello, world"), ErrMalformed},
		"empty":                {nil, ErrMalformed},
		"truncated":            {valid[:len(valid)/2], ErrMalformed},
		"garbage after header": {[]byte("%PDF-1.7\n\x00\x01garbage garbage\n%%EOF"), ErrMalformed},
		"no text":              {pdftest.Build("", ""), ErrNoText},
		"too many pages":       {valid, ErrTooManyPages},
	} {
		t.Run(name, func(t *testing.T) {
			doc, err := Extract(tc.data, Limits{Pages: 2, Content: 1 << 20, Text: 1 << 20})
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %+v, %v; want %v", doc, err, tc.want)
			}
		})
	}
}

func TestExtractCorruptedNeverPanics(t *testing.T) {
	valid := pdftest.Build("some text here", "and more")
	// Every one-byte corruption of a valid file is read or refused.
	for i := range valid {
		b := append([]byte(nil), valid...)
		b[i] ^= 0x5a
		if _, err := Extract(b, testLimits); err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrNoText) && !errors.Is(err, ErrTooManyPages) {
			t.Fatalf("byte %d: unexpected error %v", i, err)
		}
	}
}

// A PDF whose links loop (a cross-reference chain, a page tree) is
// malformed, refused after a bounded parse instead of read forever.
func TestExtractLoops(t *testing.T) {
	doc := pdftest.Build("hello")
	i := bytes.LastIndex(doc, []byte("startxref\n"))
	xref, _ := strconv.Atoi(string(bytes.TrimSpace(doc[i+len("startxref\n") : bytes.LastIndex(doc, []byte("%%EOF"))])))
	for name, b := range map[string][]byte{
		"xref Prev": bytes.Replace(doc, []byte("/Root 1 0 R >>"), []byte("/Root 1 0 R /Prev "+strconv.Itoa(xref)+" >>"), 1),
		"page tree": bytes.Replace(doc, []byte("/Kids [4 0 R]"), []byte("/Kids [2 0 R]"), 1),
	} {
		done := make(chan error, 1)
		go func() { _, err := Extract(b, testLimits); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("%s: %v", name, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: still parsing", name)
		}
	}
}

// Content or text beyond the limits (a compression bomb) is refused.
func TestExtractTooLarge(t *testing.T) {
	long := strings.Repeat("All work and no play makes Jack a dull boy.\n", 100)
	doc := pdftest.Build(long, long)
	if _, err := Extract(doc, Limits{Pages: 100, Content: 6000, Text: 1 << 20}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("content: %v", err)
	}
	if _, err := Extract(doc, Limits{Pages: 100, Content: 1 << 20, Text: 5000}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("text: %v", err)
	}
	if _, err := Extract(doc, Limits{Pages: 100, Content: 30000, Text: 10000}); err != nil {
		t.Fatalf("within: %v", err)
	}
}

func TestClean(t *testing.T) {
	if got := clean("a\x00b  \r\n\n\n\nc\xff\t"); got != "ab\n\nc" {
		t.Fatalf("%q", got)
	}
	if strings.Contains(clean("x\x1by"), "\x1b") {
		t.Fatal("control kept")
	}
}

// withXref rewrites the cross-reference table of a pdftest document
// after an edit moved its objects.
func withXref(b []byte) []byte {
	body := b[:bytes.Index(b, []byte("xref\n"))]
	locs := regexp.MustCompile(`(?m)^(\d+) 0 obj`).FindAllSubmatchIndex(body, -1)
	offsets := make([]int, len(locs))
	for _, l := range locs {
		id, _ := strconv.Atoi(string(body[l[2]:l[3]]))
		offsets[id-1] = l[0]
	}
	out := bytes.NewBuffer(append([]byte(nil), body...))
	fmt.Fprintf(out, "xref\n0 %d\n0000000000 65535 f \n", len(locs)+1)
	for _, off := range offsets {
		fmt.Fprintf(out, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(out, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(locs)+1, len(body))
	return out.Bytes()
}

// selfReferencing is a document whose page tree lists itself among its
// kids, size bytes long.
func selfReferencing(size int) []byte {
	kids := "/Kids [" + strings.Repeat("2 0 R ", size/6) + "4 0 R]"
	return withXref(bytes.Replace(pdftest.Build("hello"), []byte("/Kids [4 0 R]"), []byte(kids), 1))
}

// A page tree that loops, however it loops, is refused by the walk's
// bounds on the objects it visits, not by the read budget after seconds
// of parsing: a node among its own kids (once, or a million times), two
// nodes each other's kid, a page whose parents loop.
func TestExtractPageTreeLoops(t *testing.T) {
	doc := pdftest.Build("hello")
	for name, c := range map[string]struct {
		doc  []byte
		want string
	}{
		"itself":         {withXref(bytes.Replace(doc, []byte("/Kids [4 0 R] /Count 1"), []byte("/Kids [2 0 R 4 0 R] /Count 2"), 1)), "page tree loops"},
		"itself 1 MB":    {selfReferencing(1 << 20), "kids, more than its 1 pages"},
		"each other":     {withXref(bytes.Replace(bytes.Replace(doc, []byte("/Kids [4 0 R]"), []byte("/Kids [6 0 R]"), 1), []byte("xref\n"), []byte("6 0 obj\n<< /Type /Pages /Kids [2 0 R] /Count 1 >>\nendobj\nxref\n"), 1)), "page tree loops"},
		"parents":        {bytes.Replace(doc, []byte("/Parent 2 0 R"), []byte("/Parent 4 0 R"), 1), "parents loop"},
		"count too high": {bytes.Replace(doc, []byte("/Count 1"), []byte("/Count 3"), 1), "page 2 is missing"},
	} {
		_, err := Extract(c.doc, testLimits)
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want malformed: %s", name, err, c.want)
		}
	}
}

// The parse reads at most Limits.Read bytes of the file, and says how
// much it read.
func TestExtractReadBudget(t *testing.T) {
	doc := pdftest.Build("hello", "world")
	d, err := Extract(doc, testLimits)
	if err != nil || d.Read <= 0 {
		t.Fatalf("read %d: %v", d.Read, err)
	}
	lim := testLimits
	lim.Read = d.Read / 2
	if d, err := Extract(doc, lim); !errors.Is(err, ErrMalformed) || d.Read > lim.Read {
		t.Fatalf("read %d of %d: %v", d.Read, lim.Read, err)
	}
}

// A parse stops once its request's context ends.
func TestExtractStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ExtractContext(ctx, pdftest.Build("hello"), testLimits); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
}

// BenchmarkSelfReferencingPageTree7MB parses the 7 MB document whose page
// tree lists itself a million times (goal: refused within about a
// second; the parser must lex the node once).
func BenchmarkSelfReferencingPageTree7MB(b *testing.B) {
	doc := selfReferencing(7 << 20)
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, err := Extract(doc, testLimits); !errors.Is(err, ErrMalformed) {
			b.Fatal(err)
		}
	}
}
