// Package pdftest writes small, valid PDFs for tests: one page per text,
// each shown in Helvetica (WinAnsi), with a correct cross-reference table.
package pdftest

import (
	"bytes"
	"fmt"
	"strings"
)

// Build is a PDF of one page per text; an empty text is a page that
// draws only a filled rectangle, as a scanned page shows no text.
func Build(pages ...string) []byte {
	var objs []string
	// 1: catalog, 2: page tree, 3: font, then a page and its content per text.
	kids := make([]string, len(pages))
	for i := range pages {
		kids[i] = fmt.Sprintf("%d 0 R", 4+2*i)
	}
	objs = append(objs,
		"<< /Type /Catalog /Pages 2 0 R >>",
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(pages)),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
	for i, text := range pages {
		content := "0.5 g 72 72 200 200 re f"
		if text != "" {
			var b strings.Builder
			b.WriteString("BT /F1 12 Tf 72 720 Td 14 TL")
			for _, line := range strings.Split(text, "\n") {
				b.WriteString(" (" + escape(line) + ") Tj T*")
			}
			b.WriteString(" ET")
			content = b.String()
		}
		objs = append(objs,
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>", 5+2*i),
			fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content))
	}
	var out bytes.Buffer
	out.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = out.Len()
		fmt.Fprintf(&out, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := out.Len()
	fmt.Fprintf(&out, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&out, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&out, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return out.Bytes()
}

// escape quotes a PDF literal string's delimiters.
func escape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `(`, `\(`, `)`, `\)`).Replace(s)
}
