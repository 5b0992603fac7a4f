package pdftext

import (
	"bytes"
	"errors"
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
