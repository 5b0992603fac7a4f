package reqbody

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
)

// nullableField reads a field that may be null: absent is (zero, false),
// null (zero, true), anything else what conv makes of it; when conv
// refuses it (false), the field fails with want ("a boolean or null").
func nullableField[T any](f *Fields, name, want string, conv func(gjson.Result) (T, bool)) (T, bool) {
	var zero T
	v, ok := f.Get(name)
	if !ok {
		return zero, false
	}
	if v.Type == gjson.Null {
		return zero, true
	}
	x, ok := conv(v)
	if !ok {
		f.Fail(name, want)
		return zero, false
	}
	return x, true
}

// nullableArray reads an array field or null (nil, true); elem converts
// one entry, false when it is not of the kind want describes ("an array of
// strings or null"). An empty array is non-nil.
func nullableArray[T any](f *Fields, name, want string, elem func(gjson.Result) (T, bool)) ([]T, bool) {
	return nullableField(f, name, want, func(v gjson.Result) ([]T, bool) {
		if !v.IsArray() {
			return nil, false
		}
		out := []T{}
		for _, e := range v.Array() {
			x, ok := elem(e)
			if !ok {
				return nil, false
			}
			out = append(out, x)
		}
		return out, true
	})
}

// NullableStrings reads an array of strings or null (nil, true).
func (f *Fields) NullableStrings(name string) ([]string, bool) {
	return nullableArray(f, name, "an array of strings or null", func(e gjson.Result) (string, bool) {
		return e.Str, e.Type == gjson.String
	})
}

// Strings reads a required non-empty array of non-empty strings.
func (f *Fields) Strings(name string) []string {
	v, ok := f.Get(name)
	if !ok || !v.IsArray() || len(v.Array()) == 0 {
		f.Fail(name, "a non-empty array of strings")
		return nil
	}
	var out []string
	for _, e := range v.Array() {
		if e.Type != gjson.String || e.Str == "" {
			f.Fail(name, "a non-empty array of strings")
			return nil
		}
		out = append(out, e.Str)
	}
	return out
}

// NullableInts reads an array of integers or null.
func (f *Fields) NullableInts(name string) ([]int64, bool) {
	return nullableArray(f, name, "an array of integers or null", func(e gjson.Result) (int64, bool) {
		return e.Int(), e.Type == gjson.Number && e.Float() == float64(e.Int())
	})
}

// Number reads a number field.
func (f *Fields) Number(name string) (float64, bool) {
	v, ok := f.Get(name)
	if !ok {
		return 0, false
	}
	if v.Type != gjson.Number {
		f.Fail(name, "a number")
		return 0, false
	}
	return v.Float(), true
}

// NullableBool reads a boolean or null.
func (f *Fields) NullableBool(name string) (*bool, bool) {
	return nullableField(f, name, "a boolean or null", func(v gjson.Result) (*bool, bool) {
		b := v.Bool()
		return &b, v.IsBool()
	})
}

// NullableRaw reads a JSON array field as it was sent, or null.
func (f *Fields) NullableRaw(name string) (json.RawMessage, bool) {
	return nullableField(f, name, "an array or null", func(v gjson.Result) (json.RawMessage, bool) {
		return json.RawMessage(v.Raw), v.IsArray()
	})
}

// Each yields the top-level members, names unescaped.
func (f *Fields) Each(yield func(string, gjson.Result) bool) {
	for _, m := range f.members {
		if !yield(f.memberName(m.KeyStart, m.KeyEnd, m.Escaped), gjson.Parse(f.raw[m.ValueStart:m.ValueEnd])) {
			return
		}
	}
}

// EachRaw yields the top-level members, names unescaped, each value as
// its JSON text: for a caller that parses few of them.
func (f *Fields) EachRaw(yield func(name, raw string) bool) {
	for _, m := range f.members {
		if !yield(f.memberName(m.KeyStart, m.KeyEnd, m.Escaped), f.raw[m.ValueStart:m.ValueEnd]) {
			return
		}
	}
}

func (f *Fields) memberName(start, end uint32, escaped bool) string {
	if escaped {
		return gjson.Parse(f.raw[start-1 : end+1]).Str
	}
	return f.raw[start:end]
}

// Rebuild returns the object without the members named in drop and with
// the members extra ("name":value) appended; every other byte stays as
// the client wrote it.
func (f *Fields) Rebuild(drop []string, extra [][]byte) []byte {
	type span struct{ from, to uint32 }
	var cut []span
	firstKept := -1
	for i, m := range f.members {
		if !slices.Contains(drop, f.memberName(m.KeyStart, m.KeyEnd, m.Escaped)) {
			if firstKept < 0 {
				firstKept = i
			}
			continue
		}
		if firstKept >= 0 {
			// With the comma before it.
			cut = append(cut, span{f.members[i-1].ValueEnd, m.ValueEnd})
		}
	}
	if n := len(f.members); n > 0 && firstKept != 0 {
		// The leading members, with the comma after the last of them.
		end := f.members[n-1].ValueEnd
		if firstKept > 0 {
			end = f.members[firstKept].KeyStart - 1
		}
		cut = append([]span{{f.members[0].KeyStart - 1, end}}, cut...)
	}
	closing := strings.LastIndexByte(f.raw, '}')
	out := make([]byte, 0, len(f.raw)+64)
	at := uint32(0)
	for _, c := range cut {
		out = append(out, f.raw[at:c.from]...)
		at = c.to
	}
	out = append(out, f.raw[at:closing]...)
	for i, e := range extra {
		if i > 0 || firstKept >= 0 {
			out = append(out, ',')
		}
		out = append(out, e...)
	}
	return append(out, f.raw[closing:]...)
}
