package handlers

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/tidwall/gjson"

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
	// index holds the top-level fields, built in one pass on first use;
	// dup is the first key that appeared twice.
	index map[string]gjson.Result
	dup   string
}

// parseObject checks that b is a JSON object. An empty body reads as {}.
func parseObject(b []byte) (*fields, *APIError) {
	if len(b) == 0 {
		return &fields{root: gjson.Parse("{}")}, nil
	}
	if !gjson.ValidBytes(b) {
		return nil, BadRequest("Request body is not valid JSON")
	}
	root := gjson.ParseBytes(b)
	if !root.IsObject() {
		return nil, BadRequest("Request body must be a JSON object")
	}
	return &fields{root: root}, nil
}

func (f *fields) fail(name, want string) {
	if f.err == nil {
		f.err = BadRequest(fmt.Sprintf("%s: expected %s", name, want))
	}
}

// get returns the field and whether it is present (null counts as present).
// As with encoding/json, the last of repeated keys wins.
func (f *fields) get(name string) (gjson.Result, bool) {
	if f.index == nil {
		f.index = make(map[string]gjson.Result, 16)
		f.root.ForEach(func(k, v gjson.Result) bool {
			if _, seen := f.index[k.Str]; seen && f.dup == "" {
				f.dup = k.Str
			}
			f.index[k.Str] = v
			return true
		})
	}
	v, ok := f.index[name]
	return v, ok
}

// duplicate returns a top-level key that appears more than once.
func (f *fields) duplicate() (string, bool) {
	f.get("")
	return f.dup, f.dup != ""
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

// setIf assigns v to *dst when the field was present in the request: the
// partial-update rule of every PATCH route.
func setIf[T any](dst *T, v T, present bool) {
	if present {
		*dst = v
	}
}
