package handlers

import (
	"encoding/json"
	"testing"
)

func TestJSONQuoteMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "gen-0001763900000000-abcdef", "vendor/model:free", "a\"b", "a\\b", "<&>",
		"tab\there", "\x01", "日本", "\xff", "\u2028", "~ DEL\x7f"} {
		want, _ := json.Marshal(s)
		if got := jsonQuote(s); string(got) != string(want) {
			t.Errorf("jsonQuote(%q) = %s, want %s", s, got, want)
		}
	}
}
