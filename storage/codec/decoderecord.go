package codec

import "encoding/json"

// Decode decodes v into x with fast, else with encoding/json.
func Decode[T any](v []byte, x *T, fast func(*Parser, *T) bool) error {
	p := NewParser(v)
	if fast(&p, x) && p.Done() {
		return nil
	}
	*x = *new(T)
	return json.Unmarshal(v, x)
}
