package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/handlers/jsoncheck"
	"github.com/tollgate-dev/caddy-tollgate/money"
)

// maxAdminBody bounds administrative request bodies.
const maxAdminBody = 1 << 20

// bufferedBody is a request body an earlier handler already read into
// memory (setBody).
type bufferedBody struct {
	*bytes.Reader
	b []byte
}

func (*bufferedBody) Close() error { return nil }

// readBody reads a request body up to limit bytes: 413 past it. A body
// still unread in memory is taken as it is.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *APIError) {
	if bb, ok := r.Body.(*bufferedBody); ok && bb.Len() == len(bb.b) {
		if int64(len(bb.b)) > limit {
			return nil, newError(http.StatusRequestEntityTooLarge, fmt.Sprintf("Request body is larger than %d bytes", limit))
		}
		bb.Reset(nil) // read: as if consumed
		return bb.b, nil
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	var b []byte
	var err error
	if n := r.ContentLength; n > 0 && n <= limit {
		// Sized from Content-Length; the extra byte detects a longer body.
		b = make([]byte, 0, n+1)
		for err == nil && len(b) < cap(b) {
			var m int
			m, err = body.Read(b[len(b):cap(b)])
			b = b[:len(b)+m]
		}
		if errors.Is(err, io.EOF) {
			err = nil
		} else if err == nil {
			rest, rerr := io.ReadAll(body)
			b, err = append(b, rest...), rerr
		}
	} else {
		b, err = io.ReadAll(body)
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, newError(http.StatusRequestEntityTooLarge, fmt.Sprintf("Request body is larger than %d bytes", limit))
	}
	if err != nil {
		return nil, BadRequest("Could not read request body")
	}
	return b, nil
}

// fields reads typed fields from a JSON object and remembers the first type
// error, so that a handler can read every field and then check once.
type fields struct {
	root gjson.Result
	err  *APIError
	// raw is the body as root reads it; members are its top-level
	// members, found by the check that parseObject made.
	raw     string
	members []jsoncheck.Member
	small   [16]jsoncheck.Member // members' first backing array
}

// parseObject checks that b is a JSON object within the bounds of
// jsoncheck (depth, UTF-8, no repeated key at any depth), without
// recursion. An empty body reads as {}.
func parseObject(b []byte) (*fields, *APIError) {
	return parseWith(b, jsoncheck.Check)
}

// parseText is parseObject for administrative bodies, whose strings are
// all names, ids and descriptions (jsoncheck.CheckText).
func parseText(b []byte) (*fields, *APIError) {
	return parseWith(b, jsoncheck.CheckText)
}

func parseWith(b []byte, check func([]byte, *[]jsoncheck.Member) *jsoncheck.Error) (*fields, *APIError) {
	if len(b) == 0 {
		return &fields{root: gjson.Parse("{}")}, nil
	}
	f := new(fields)
	f.members = f.small[:0]
	if err := check(b, &f.members); err != nil {
		return nil, bodyError(err)
	}
	f.raw = string(b)
	f.root = gjson.Parse(f.raw)
	if !f.root.IsObject() {
		return nil, BadRequest("Request body must be a JSON object")
	}
	return f, nil
}

// bodyError is the 400 for a body jsoncheck refused.
func bodyError(err *jsoncheck.Error) *APIError {
	switch {
	case err.Kind == jsoncheck.TooDeep:
		return BadRequest(fmt.Sprintf("Request body nests deeper than %d levels", jsoncheck.MaxDepth))
	case err.Kind == jsoncheck.Syntax:
		return BadRequest("Request body is not valid JSON")
	}
	return BadRequest(err.Error())
}

func (f *fields) fail(name, want string) {
	f.failWith(BadRequest(fmt.Sprintf("%s: expected %s", name, want)))
}

func (f *fields) failWith(e *APIError) {
	if f.err == nil {
		f.err = e
	}
}

// get returns the field and whether it is present (null counts as
// present). Objects are small: a linear search beats building a map.
func (f *fields) get(name string) (gjson.Result, bool) {
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

// String reads a string field.
func (f *fields) String(name string) (string, bool) {
	v, ok := f.get(name)
	if !ok {
		return "", false
	}
	if v.Type != gjson.String {
		f.fail(name, "a string")
		return "", false
	}
	if e := CheckTextField(name, v); e != nil {
		f.failWith(e)
		return "", false
	}
	return v.Str, true
}

// NullableString reads a string-or-null field; a present null yields nil, true.
func (f *fields) NullableString(name string) (*string, bool) {
	v, ok := f.get(name)
	if !ok {
		return nil, false
	}
	if v.Type == gjson.Null {
		return nil, true
	}
	if v.Type != gjson.String {
		f.fail(name, "a string or null")
		return nil, false
	}
	if e := CheckTextField(name, v); e != nil {
		f.failWith(e)
		return nil, false
	}
	s := v.Str
	return &s, true
}

// Bool reads a boolean field.
func (f *fields) Bool(name string) (bool, bool) {
	v, ok := f.get(name)
	if !ok {
		return false, false
	}
	if !v.IsBool() {
		f.fail(name, "a boolean")
		return false, false
	}
	return v.Bool(), true
}

// NullableAmount reads a number-or-null credit amount exactly from its JSON
// text; a present null yields nil, true.
func (f *fields) NullableAmount(name string) (*money.Amount, bool) {
	v, ok := f.get(name)
	if !ok {
		return nil, false
	}
	if v.Type == gjson.Null {
		return nil, true
	}
	if v.Type != gjson.Number {
		f.fail(name, "a number or null")
		return nil, false
	}
	a, err := money.ParseAmount(v.Raw)
	if err != nil {
		f.fail(name, "a number within range")
		return nil, false
	}
	return &a, true
}

// NullableTime reads an RFC 3339 timestamp or null. With utcOnly, offsets
// other than Z are refused.
func (f *fields) NullableTime(name string, utcOnly bool) (*time.Time, bool) {
	s, ok := f.NullableString(name)
	if !ok || s == nil {
		return nil, ok
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		f.fail(name, "an ISO 8601 timestamp such as 2027-12-31T23:59:59Z")
		return nil, false
	}
	if _, off := t.Zone(); utcOnly && off != 0 || utcOnly && (*s)[len(*s)-1] != 'Z' && (*s)[len(*s)-1] != 'z' {
		f.fail(name, "a UTC timestamp ending in Z")
		return nil, false
	}
	return &t, true
}

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

// setIf assigns v to *dst when the field was present in the request: the
// partial-update rule of every PATCH route.
func setIf[T any](dst *T, v T, present bool) {
	if present {
		*dst = v
	}
}
