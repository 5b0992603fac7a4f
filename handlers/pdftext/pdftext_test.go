package pdftext

import (
	"errors"
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/handlers/pdftext/pdftest"
)

func TestExtract(t *testing.T) {
	doc, err := Extract(pdftest.Build("Quarterly report (draft)\nRevenue grew 12%.", "", "Page three: caf\xe9 costs"), 100)
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
			doc, err := Extract(tc.data, 2)
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
		if _, err := Extract(b, 100); err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrNoText) && !errors.Is(err, ErrTooManyPages) {
			t.Fatalf("byte %d: unexpected error %v", i, err)
		}
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
