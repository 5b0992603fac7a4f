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
	if !gjson.ValidBytes(v) {
		return errors.New("invalid JSON")
	}
	// A view of v, not a copy: every string kept is cloned.
	root := gjson.Parse(unsafe.String(unsafe.SliceData(v), len(v)))
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
		case "usage":
			err = decodeCounters(x, &k.Usage)
		case "byok_usage":
			err = decodeCounters(x, &k.BYOKUsage)
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
