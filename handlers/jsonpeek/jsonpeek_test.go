package jsonpeek

import (
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// skipJSONStringByBytes is SkipString one byte at a time, the
// reference for its scans (escaped is compared for strings that close).
func skipJSONStringByBytes(doc []byte, i int) (end int, escaped bool) {
	for j := i + 1; j < len(doc); j++ {
		switch doc[j] {
		case '"':
			return j + 1, escaped
		case '\\':
			escaped = true
			j++
		}
	}
	return -1, escaped
}

func TestSkipJSONString(t *testing.T) {
	long := strings.Repeat("abcdefgh", 5)
	for _, s := range []string{
		`""`, `"a"`, `"abcdefg"`, `"abcdefgh"`, `"abcdefghi"`, `"` + long + `"`, `"` + long + `\"x" tail`,
		`"\\"`, `"a\\\"b"`, `"abcdefg\"`, `"unterminated`, `"` + long, `"ab\`, `"é\u00e9"`, `"x"y"`,
		// past the first 32 bytes: escapes before, at and after the quote
		`"` + long[:31] + `\"x"`, `"` + long[:32] + `\"x"`, `"` + long[:30] + `\\"`,
		`"abcdefghijklmno\"p"`, `"abcdefghijklmnop\"q"`, `"` + long + `\\"`, `"` + long + `\"`, `"` + long + `\"` + long + `"`,
		`"` + strings.Repeat(`\n`, 30) + `"`, `"` + long + `\\\"\\` + long + `"` + long, `"` + long + `\`,
	} {
		for pad := range 9 { // every alignment of the string in its word
			doc := []byte(strings.Repeat(" ", pad) + s)
			end, esc := SkipString(doc, pad)
			wantEnd, wantEsc := skipJSONStringByBytes(doc, pad)
			if end != wantEnd || end >= 0 && esc != wantEsc {
				t.Errorf("SkipString(%q, %d) = %d, %v; want %d, %v", doc, pad, end, esc, wantEnd, wantEsc)
			}
		}
	}
}

func FuzzSkipJSONString(f *testing.F) {
	f.Add([]byte(`"abc\"defghijklmnop\\"`), 0)
	f.Add([]byte(`x"12345678\`), 1)
	f.Fuzz(func(t *testing.T, doc []byte, i int) {
		if i < 0 || i >= len(doc) {
			return
		}
		end, esc := SkipString(doc, i)
		wantEnd, wantEsc := skipJSONStringByBytes(doc, i)
		if end != wantEnd || end >= 0 && esc != wantEsc {
			t.Fatalf("SkipString(%q, %d) = %d, %v; want %d, %v", doc, i, end, esc, wantEnd, wantEsc)
		}
	})
}

// ParseSkipped is gjson.Parse on each value SkipValue skips.
func TestParseSkippedAsGJSON(t *testing.T) {
	values := []string{`""`, `"a"`, `"chatcmpl-Q2ZKXB7LJ4C5GQ6ZT3W7N2HMUA"`, `"a\"b"`, `"\\"`, `"\u00e9t\u00e9"`, `"é"`,
		`"x\ny"`, `12`, `-1.5e3`, `true`, `false`, `null`, `{"a":"b"}`, `[1,"\""]`, `"unclosed`, `"\\\\"`}
	for _, v := range values {
		doc := `{"k":` + v + `}`
		start := len(`{"k":`)
		end := SkipValue([]byte(doc), start)
		if end < 0 {
			continue
		}
		got, want := ParseSkipped(doc, start, end), gjson.Parse(doc[start:end])
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %#v, want %#v", v, got, want)
		}
	}
}
