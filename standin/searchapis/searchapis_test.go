package searchapis

import (
	"reflect"
	"testing"
)

func TestParseSiteOperators(t *testing.T) {
	text, inc, exc := parseSiteOperators("a b (site:x.com OR site:y.com) -site:z.com c")
	if text != "a b c" || !reflect.DeepEqual(inc, []string{"x.com", "y.com"}) || !reflect.DeepEqual(exc, []string{"z.com"}) {
		t.Errorf("parseSiteOperators: %q %q %q", text, inc, exc)
	}
}

func TestHostPattern(t *testing.T) {
	for in, want := range map[string]string{
		"Example.com":          "example.com",
		"https://example.com/": "example.com",
		".example.com":         "*.example.com",
		"*.gov":                "*.gov",
		"example.com/Blog/":    "example.com/blog",
		"example.com.":         "example.com",
		"  ":                   "",
		"https://":             "",
	} {
		if got := hostPattern(in); got != want {
			t.Errorf("hostPattern(%q) = %q, want %q", in, got, want)
		}
	}
}
