package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// decodeAPIKey decodes a stored key record as encoding/json would into
// APIKey (TestDecodeAPIKeyMatchesEncodingJSON), in one pass without
// reflection: opening a database decodes every key, and encoding/json
// was most of that time at a million keys. Strings are copied out of the
// record, so that no key keeps the whole record alive.
func decodeAPIKey(v []byte, k *APIKey) error {
	if decodeAPIKeyFast(v, k) {
		return nil
	}
	*k = APIKey{}
	if !gjson.ValidBytes(v) {
		return errors.New("invalid JSON")
	}
	// A view of v, not a copy: every string kept is cloned.
	root := gjson.Parse(bytesString(v))
	if !root.IsObject() {
		return errors.New("not an object")
	}
	var err error
	root.ForEach(func(name, x gjson.Result) bool {
		switch name.Str {
		case "hash":
			err = decodeString(x, &k.Hash)
		case "account_id":
			err = decodeString(x, &k.AccountID)
		case "workspace_id":
			err = decodeString(x, &k.WorkspaceID)
		case "name":
			err = decodeString(x, &k.Name)
		case "label":
			err = decodeString(x, &k.Label)
		case "disabled":
			err = decodeBool(x, &k.Disabled)
		case "limit":
			if x.Type == gjson.Null {
				k.Limit = nil
				break
			}
			var a money.Amount
			if err = decodeAmount(x, &a); err == nil {
				k.Limit = &a
			}
		case "limit_reset":
			var s string
			if err = decodeString(x, &s); err == nil && x.Type != gjson.Null {
				k.LimitReset = money.Interval(s)
			}
		case "include_byok_in_limit":
			err = decodeBool(x, &k.IncludeBYOKInLimit)
		case "creator_user_id":
			err = decodeNullableString(x, &k.CreatorUserID)
		case "external_user":
			err = decodeNullableString(x, &k.ExternalUser)
		case "created_at":
			err = k.CreatedAt.UnmarshalJSON(rawBytes(x))
		case "updated_at":
			err = k.UpdatedAt.UnmarshalJSON(rawBytes(x))
		case "expires_at":
			if x.Type == gjson.Null {
				k.ExpiresAt = nil
				break
			}
			var t time.Time
			if err = t.UnmarshalJSON(rawBytes(x)); err == nil {
				k.ExpiresAt = &t
			}
		case "seq":
			if x.Type != gjson.Null {
				k.Seq, err = strconv.ParseUint(x.Raw, 10, 64)
			}
		case "limit_by_admin":
			err = decodeBool(x, &k.LimitByAdmin)
		case "disabled_by_admin":
			err = decodeBool(x, &k.DisabledByAdmin)
		case "usage":
			err = decodeCounters(x, &k.Usage)
		case "byok_usage":
			err = decodeCounters(x, &k.BYOKUsage)
		case "connect":
			// Rare (keys of the connect flow): encoding/json copies
			// its strings.
			k.Connect = nil
			if x.Type != gjson.Null {
				var c ConnectApp
				if err = json.Unmarshal([]byte(x.Raw), &c); err == nil {
					k.Connect = &c
				}
			}
		default:
			// Any other member is not APIKey's (encoding/json ignores
			// it), unless it names a field in another case: those are
			// left to encoding/json.
			if !isASCIILower(name.Str) {
				err = errCaseFold
			}
		}
		if err != nil {
			err = fmt.Errorf("%s: %w", name.Str, err)
		}
		return err == nil
	})
	if errors.Is(err, errCaseFold) {
		*k = APIKey{}
		return json.Unmarshal(v, k)
	}
	return err
}

// rawBytes is x's JSON text as bytes, without a copy: for decoders that
// only read it.
func rawBytes(x gjson.Result) []byte { return unsafe.Slice(unsafe.StringData(x.Raw), len(x.Raw)) }

// decodeAmount is money.Amount's UnmarshalJSON without its copy.
func decodeAmount(x gjson.Result, a *money.Amount) error {
	v, err := money.ParseAmount(strings.Trim(x.Raw, `"`))
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// errCaseFold marks a member name encoding/json might match to a field
// case-insensitively: the record is decoded by encoding/json instead.
var errCaseFold = errors.New("member name needs encoding/json")

func isASCIILower(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' || c >= 0x80 {
			return false
		}
	}
	return true
}

// decodeString sets *s to a JSON string (null leaves it, as encoding/json
// does). A string with escapes or non-ASCII bytes goes through
// encoding/json, for its exact handling of both.
func decodeString(x gjson.Result, s *string) error {
	switch x.Type {
	case gjson.Null:
		return nil
	case gjson.String:
	default:
		return fmt.Errorf("expected a string, got %s", x.Raw)
	}
	raw := x.Raw[1 : len(x.Raw)-1]
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c == '\\' || c >= 0x80 {
			return json.Unmarshal([]byte(x.Raw), s)
		}
	}
	*s = strings.Clone(raw)
	return nil
}

func decodeNullableString(x gjson.Result, s **string) error {
	if x.Type == gjson.Null {
		*s = nil
		return nil
	}
	v := new(string)
	if err := decodeString(x, v); err != nil {
		return err
	}
	*s = v
	return nil
}

func decodeBool(x gjson.Result, b *bool) error {
	switch x.Type {
	case gjson.Null:
	case gjson.True:
		*b = true
	case gjson.False:
		*b = false
	default:
		return fmt.Errorf("expected a boolean, got %s", x.Raw)
	}
	return nil
}

// decodeCounters decodes money.UsageCounters as encoding/json would: its
// members merged into what is there, null leaving it.
func decodeCounters(x gjson.Result, c *money.UsageCounters) error {
	if x.Type == gjson.Null {
		return nil
	}
	if !x.IsObject() {
		return fmt.Errorf("expected an object, got %s", x.Raw)
	}
	var err error
	x.ForEach(func(name, v gjson.Result) bool {
		switch name.Str {
		case "total":
			if v.Type != gjson.Null {
				err = decodeAmount(v, &c.Total)
			}
		case "daily":
			err = decodeWindowed(v, &c.Daily)
		case "weekly":
			err = decodeWindowed(v, &c.Weekly)
		case "monthly":
			err = decodeWindowed(v, &c.Monthly)
		default:
			if !isASCIILower(name.Str) {
				err = errCaseFold
			}
		}
		return err == nil
	})
	return err
}

func decodeWindowed(x gjson.Result, w *money.Windowed) error {
	if x.Type == gjson.Null {
		return nil
	}
	if !x.IsObject() {
		return fmt.Errorf("expected an object, got %s", x.Raw)
	}
	var err error
	x.ForEach(func(name, v gjson.Result) bool {
		switch name.Str {
		case "p":
			if v.Type != gjson.Null {
				w.Period, err = strconv.ParseInt(v.Raw, 10, 64)
			}
		case "v":
			if v.Type != gjson.Null {
				err = decodeAmount(v, &w.Value)
			}
		default:
			if !isASCIILower(name.Str) {
				err = errCaseFold
			}
		}
		return err == nil
	})
	return err
}

// decodeAPIKeyFast decodes a key record written by apiKeyJSON, member by
// member in its order, and reports false at the first byte it does not
// expect (another order, escapes or non-ASCII text in a string, white
// space, a number JSON would refuse): the caller then decodes the record
// with decodeAPIKey. What it accepts is valid JSON that it decodes as
// encoding/json does.
func decodeAPIKeyFast(v []byte, k *APIKey) bool {
	p := keyParser{b: v}
	ok := p.lit(`{"hash":`) && p.str(&k.Hash) &&
		p.lit(`,"account_id":`) && p.str(&k.AccountID) &&
		p.lit(`,"workspace_id":`) && p.str(&k.WorkspaceID) &&
		p.lit(`,"name":`) && p.str(&k.Name) &&
		p.lit(`,"label":`) && p.str(&k.Label) &&
		p.lit(`,"disabled":`) && p.boolean(&k.Disabled) &&
		p.lit(`,"limit":`) && p.nullableAmount(&k.Limit)
	var reset string
	ok = ok && p.lit(`,"limit_reset":`) && p.str(&reset)
	k.LimitReset = money.Interval(reset)
	ok = ok && p.lit(`,"include_byok_in_limit":`) && p.boolean(&k.IncludeBYOKInLimit) &&
		p.lit(`,"creator_user_id":`) && p.nullableStr(&k.CreatorUserID) &&
		p.lit(`,"external_user":`) && p.nullableStr(&k.ExternalUser) &&
		p.lit(`,"created_at":`) && p.time(&k.CreatedAt) &&
		p.lit(`,"updated_at":`) && p.time(&k.UpdatedAt) &&
		p.lit(`,"expires_at":`) && p.nullableTime(&k.ExpiresAt) &&
		p.lit(`,"seq":`) && p.uint(&k.Seq) &&
		p.lit(`,"usage":`) && p.counters(&k.Usage) &&
		p.lit(`,"byok_usage":`) && p.counters(&k.BYOKUsage)
	k.LimitByAdmin = ok && p.lit(`,"limit_by_admin":true`)
	k.DisabledByAdmin = ok && p.lit(`,"disabled_by_admin":true`)
	ok = ok && p.lit(`}`)
	return ok && len(p.b) == 0
}

// keyParser reads a record apiKeyJSON wrote, from the front of b.
type keyParser struct{ b []byte }

func (p *keyParser) lit(s string) bool {
	if len(p.b) < len(s) || string(p.b[:len(s)]) != s {
		return false
	}
	p.b = p.b[len(s):]
	return true
}

// rawStr returns a string's text between its quotes, when it has no
// escape, control or non-ASCII byte.
func (p *keyParser) rawStr() ([]byte, bool) {
	if len(p.b) == 0 || p.b[0] != '"' {
		return nil, false
	}
	for i := 1; i < len(p.b); i++ {
		switch c := p.b[i]; {
		case c == '"':
			s := p.b[1:i]
			p.b = p.b[i+1:]
			return s, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, false
		}
	}
	return nil, false
}

// skipStr reads a string it does not keep.
func (p *keyParser) skipStr() bool {
	_, ok := p.rawStr()
	return ok
}

func (p *keyParser) str(s *string) bool {
	raw, ok := p.rawStr()
	if ok {
		*s = string(raw)
	}
	return ok
}

func (p *keyParser) nullableStr(s **string) bool {
	if p.lit("null") {
		*s = nil
		return true
	}
	v := new(string)
	*s = v
	return p.str(v)
}

func (p *keyParser) boolean(b *bool) bool {
	switch {
	case p.lit("true"):
		*b = true
	case p.lit("false"):
		*b = false
	default:
		return false
	}
	return true
}

// number returns a JSON number of the form -?(0|[1-9][0-9]*)(.[0-9]+)?
// (fraction only when frac), the only numbers apiKeyJSON writes.
func (p *keyParser) number(frac bool) ([]byte, bool) {
	i := 0
	if i < len(p.b) && p.b[i] == '-' {
		i++
	}
	start := i
	for i < len(p.b) && p.b[i] >= '0' && p.b[i] <= '9' {
		i++
	}
	if i == start || p.b[start] == '0' && i-start > 1 {
		return nil, false
	}
	if frac && i < len(p.b) && p.b[i] == '.' {
		i++
		f := i
		for i < len(p.b) && p.b[i] >= '0' && p.b[i] <= '9' {
			i++
		}
		if i == f {
			return nil, false
		}
	}
	if i < len(p.b) && (p.b[i] == '.' || p.b[i] == 'e' || p.b[i] == 'E') {
		return nil, false // a form this parser leaves to decodeAPIKey
	}
	n := p.b[:i]
	p.b = p.b[i:]
	return n, true
}

func (p *keyParser) amount(a *money.Amount) bool {
	n, ok := p.number(true)
	if !ok {
		return false
	}
	v, err := money.ParseAmount(bytesString(n))
	*a = v
	return err == nil
}

func (p *keyParser) nullableAmount(a **money.Amount) bool {
	if p.lit("null") {
		*a = nil
		return true
	}
	v := new(money.Amount)
	*a = v
	return p.amount(v)
}

func (p *keyParser) int(n *int64) bool {
	d, ok := p.number(false)
	if !ok {
		return false
	}
	v, err := strconv.ParseInt(bytesString(d), 10, 64)
	*n = v
	return err == nil
}

func (p *keyParser) uint(n *uint64) bool {
	d, ok := p.number(false)
	if !ok {
		return false
	}
	v, err := strconv.ParseUint(bytesString(d), 10, 64)
	*n = v
	return err == nil
}

func (p *keyParser) time(t *time.Time) bool {
	start := p.b
	if _, ok := p.rawStr(); !ok {
		return false
	}
	return t.UnmarshalJSON(start[:len(start)-len(p.b)]) == nil
}

func (p *keyParser) nullableTime(t **time.Time) bool {
	if p.lit("null") {
		*t = nil
		return true
	}
	v := new(time.Time)
	*t = v
	return p.time(v)
}

func (p *keyParser) windowed(w *money.Windowed) bool {
	return p.lit(`{"p":`) && p.int(&w.Period) && p.lit(`,"v":`) && p.amount(&w.Value) && p.lit(`}`)
}

func (p *keyParser) counters(c *money.UsageCounters) bool {
	return p.lit(`{"total":`) && p.amount(&c.Total) &&
		p.lit(`,"daily":`) && p.windowed(&c.Daily) &&
		p.lit(`,"weekly":`) && p.windowed(&c.Weekly) &&
		p.lit(`,"monthly":`) && p.windowed(&c.Monthly) &&
		p.lit(`}`)
}

// bytesString views b as a string, for a parse or lookup that does not
// keep it.
func bytesString(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}
