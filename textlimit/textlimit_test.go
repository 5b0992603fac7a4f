package textlimit

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	cases := []struct {
		name, field, value, want string
	}{
		{"name at its bound", "name", strings.Repeat("é", MaxNameLen), ""},
		{"name past its bound", "name", strings.Repeat("é", MaxNameLen+1), "name: expected at most 256 characters"},
		{"line break in a name", "name", "a\nb", "name: control characters are not allowed"},
		{"line break in a description", "description", "a\nb", ""},
		{"NUL in a description", "description", "a\x00b", "description: control characters are not allowed"},
		{"comment's own bound", "comment", strings.Repeat("x", MaxCommentLen+1), "comment: expected at most 1000 characters"},
		{"URL bound", "base_url", strings.Repeat("x", MaxURLLen), ""},
		{"pasted key with a line break", "api_key", "sk-1\n", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Check(c.field, c.value)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != c.want {
				t.Fatalf("Check(%q) = %q, want %q", c.field, got, c.want)
			}
		})
	}
}
