package handlers

import (
	"encoding/json"
	"unicode/utf8"
)

// jsonQuote is s as a JSON string, as encoding/json writes it. Ids and
// names (the answer's identity, a provider's model id) need no escaping:
// they are quoted as they are, without encoding/json's reflection.
func jsonQuote(s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			return b
		}
	}
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
