package reqbody

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
	"github.com/tollgate-dev/caddy-tollgate/money"
)

// Fields reads typed fields from a JSON object and remembers the first type
// error, so that a handler can read every field and then check once.
type Fields struct {
	root gjson.Result
	// Err is the first error a reader met; nil while every field read
	// was what it expected.
	Err *apierror.Error
	// raw is the body as root reads it; members are its top-level
	// members, found by the check that parseObject made.
	raw     string
	members []jsoncheck.Member
	small   [16]jsoncheck.Member // members' first backing array
	// names has keyBit set for each member's name (every bit for a name
	// with an escape): most lookups are of fields a request does not
	// have, and a clear bit answers them without comparing any name.
	names uint64
}

// ParseObject checks that b is a JSON object within the bounds of
// jsoncheck (depth, UTF-8, no repeated key at any depth), without
// recursion. An empty body reads as {}. The fields, and the strings read
// from them, share b's memory: b must not change afterwards.
func ParseObject(b []byte) (*Fields, *apierror.Error) {
	return parseWith(new(Fields), b, jsoncheck.Check)
}

// ParseObjectIn is ParseObject into f, which the caller owns (a request's
// state holds one): no allocation of its own. f is overwritten; on an
// error it holds nothing usable.
func ParseObjectIn(f *Fields, b []byte) (*Fields, *apierror.Error) {
	return parseWith(f, b, jsoncheck.Check)
}

// ParseText is ParseObject for administrative bodies, whose strings are
// all names, ids and descriptions (jsoncheck.CheckText).
func ParseText(b []byte) (*Fields, *apierror.Error) {
	return parseWith(new(Fields), b, jsoncheck.CheckText)
}

func parseWith(f *Fields, b []byte, check func([]byte, *[]jsoncheck.Member) *jsoncheck.Error) (*Fields, *apierror.Error) {
	// What the fields below do not set (small's entries are set as
	// members grows over them).
	f.Err, f.raw, f.names = nil, "", 0
	f.members = f.small[:0]
	if len(b) == 0 {
		f.root = gjson.Parse("{}")
		return f, nil
	}
	if err := check(b, &f.members); err != nil {
		return nil, bodyError(err)
	}
	// A view of b, not a copy (one allocation and a pass over the body
	// less): nothing writes a request body once read. Every body the
	// gateway changes (model id, redactions, output limits, search and
	// fetch plans, translations) is built anew, by append or sjson
	// without ReplaceInPlace, and reqbody.Read's buffers are the
	// request's own.
	f.raw = unsafe.String(unsafe.SliceData(b), len(b))
	for _, m := range f.members {
		if m.Escaped {
			f.names = ^uint64(0)
			break
		}
		f.names |= keyBit(f.raw[m.KeyStart:m.KeyEnd])
	}
	f.root = gjson.Parse(f.raw)
	if !f.root.IsObject() {
		return nil, apierror.BadRequest("Request body must be a JSON object")
	}
	return f, nil
}

// bodyError is the 400 for a body jsoncheck refused.
func bodyError(err *jsoncheck.Error) *apierror.Error {
	switch {
	case err.Kind == jsoncheck.TooDeep:
		return apierror.BadRequest(fmt.Sprintf("Request body nests deeper than %d levels", jsoncheck.MaxDepth))
	case err.Kind == jsoncheck.Syntax:
		return apierror.BadRequest("Request body is not valid JSON")
	}
	return apierror.BadRequest(err.Error())
}

// Fail records that field name is not what want says.
func (f *Fields) Fail(name, want string) {
	f.FailWith(apierror.BadRequest(fmt.Sprintf("%s: expected %s", name, want)))
}

// FailWith records e unless an error is recorded already.
func (f *Fields) FailWith(e *apierror.Error) {
	if f.Err == nil {
		f.Err = e
	}
}

// Get returns the field and whether it is present (null counts as
// present). Objects are small: a linear search beats building a map.
func (f *Fields) Get(name string) (gjson.Result, bool) {
	if f.names&keyBit(name) == 0 {
		return gjson.Result{}, false
	}
	for _, m := range f.members {
		k := f.raw[m.KeyStart:m.KeyEnd]
		if m.Escaped {
			k = gjson.Parse(f.raw[m.KeyStart-1 : m.KeyEnd+1]).Str
		}
		if k == name {
			return gjson.Parse(f.raw[m.ValueStart:m.ValueEnd]), true
		}
	}
	return gjson.Result{}, false
}

// keyBit is a bit of 64 that a name picks by its length and its first and
// last bytes.
func keyBit(name string) uint64 {
	h := uint(len(name))
	if h > 0 {
		h += uint(name[0])*7 + uint(name[len(name)-1])*3
	}
	return 1 << (h & 63)
}

// String reads a string field.
func (f *Fields) String(name string) (string, bool) {
	v, ok := f.Get(name)
	if !ok {
		return "", false
	}
	if v.Type != gjson.String {
		f.Fail(name, "a string")
		return "", false
	}
	if e := CheckTextField(name, v); e != nil {
		f.FailWith(e)
		return "", false
	}
	return v.Str, true
}

// NullableString reads a string-or-null field; a present null yields nil, true.
func (f *Fields) NullableString(name string) (*string, bool) {
	v, ok := f.Get(name)
	if !ok {
		return nil, false
	}
	if v.Type == gjson.Null {
		return nil, true
	}
	if v.Type != gjson.String {
		f.Fail(name, "a string or null")
		return nil, false
	}
	if e := CheckTextField(name, v); e != nil {
		f.FailWith(e)
		return nil, false
	}
	s := v.Str
	return &s, true
}

// Bool reads a boolean field.
func (f *Fields) Bool(name string) (bool, bool) {
	v, ok := f.Get(name)
	if !ok {
		return false, false
	}
	if !v.IsBool() {
		f.Fail(name, "a boolean")
		return false, false
	}
	return v.Bool(), true
}

// NullableAmount reads a number-or-null credit amount exactly from its JSON
// text; a present null yields nil, true.
func (f *Fields) NullableAmount(name string) (*money.Amount, bool) {
	v, ok := f.Get(name)
	if !ok {
		return nil, false
	}
	if v.Type == gjson.Null {
		return nil, true
	}
	if v.Type != gjson.Number {
		f.Fail(name, "a number or null")
		return nil, false
	}
	a, err := money.ParseAmount(v.Raw)
	if err != nil {
		f.Fail(name, "a number within range")
		return nil, false
	}
	return &a, true
}

// NullableTime reads an RFC 3339 timestamp or null. With utcOnly, offsets
// other than Z are refused.
func (f *Fields) NullableTime(name string, utcOnly bool) (*time.Time, bool) {
	s, ok := f.NullableString(name)
	if !ok || s == nil {
		return nil, ok
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		f.Fail(name, "an ISO 8601 timestamp such as 2027-12-31T23:59:59Z")
		return nil, false
	}
	if _, off := t.Zone(); utcOnly && off != 0 || utcOnly && (*s)[len(*s)-1] != 'Z' && (*s)[len(*s)-1] != 'z' {
		f.Fail(name, "a UTC timestamp ending in Z")
		return nil, false
	}
	return &t, true
}

// SetIf assigns v to *dst when the field was present in the request: the
// partial-update rule of every PATCH route.
func SetIf[T any](dst *T, v T, present bool) {
	if present {
		*dst = v
	}
}

// Root is the whole object.
func (f *Fields) Root() gjson.Result { return f.root }
