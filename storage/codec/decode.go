package codec

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// RawBytes is x's JSON text as bytes, without a copy: for decoders that
// only read it.
func RawBytes(x gjson.Result) []byte { return unsafe.Slice(unsafe.StringData(x.Raw), len(x.Raw)) }

// DecodeAmount is money.Amount's UnmarshalJSON without its copy.
func DecodeAmount(x gjson.Result, a *money.Amount) error {
	v, err := money.ParseAmount(strings.Trim(x.Raw, `"`))
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// ErrCaseFold marks a member name encoding/json might match to a field
// case-insensitively: the record is decoded by encoding/json instead.
var ErrCaseFold = errors.New("member name needs encoding/json")

// IsASCIILower reports whether s has no upper-case or non-ASCII byte: a
// member name only encoding/json's exact match could take.
func IsASCIILower(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' || c >= 0x80 {
			return false
		}
	}
	return true
}

// DecodeString sets *s to a JSON string (null leaves it, as encoding/json
// does). A string with escapes or non-ASCII bytes goes through
// encoding/json, for its exact handling of both.
func DecodeString(x gjson.Result, s *string) error {
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

func DecodeNullableString(x gjson.Result, s **string) error {
	if x.Type == gjson.Null {
		*s = nil
		return nil
	}
	v := new(string)
	if err := DecodeString(x, v); err != nil {
		return err
	}
	*s = v
	return nil
}

func DecodeBool(x gjson.Result, b *bool) error {
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

// DecodeCounters decodes money.UsageCounters as encoding/json would: its
// members merged into what is there, null leaving it.
func DecodeCounters(x gjson.Result, c *money.UsageCounters) error {
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
				err = DecodeAmount(v, &c.Total)
			}
		case "daily":
			err = DecodeWindowed(v, &c.Daily)
		case "weekly":
			err = DecodeWindowed(v, &c.Weekly)
		case "monthly":
			err = DecodeWindowed(v, &c.Monthly)
		default:
			if !IsASCIILower(name.Str) {
				err = ErrCaseFold
			}
		}
		return err == nil
	})
	return err
}

func DecodeWindowed(x gjson.Result, w *money.Windowed) error {
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
				err = DecodeAmount(v, &w.Value)
			}
		default:
			if !IsASCIILower(name.Str) {
				err = ErrCaseFold
			}
		}
		return err == nil
	})
	return err
}
