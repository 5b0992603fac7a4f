package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/codec"
)

// DecodeAPIKey decodes a stored key record as encoding/json would into
// APIKey (TestDecodeAPIKeyMatchesEncodingJSON), in one pass without
// reflection: opening a database decodes every key, and encoding/json
// was most of that time at a million keys. Strings are copied out of the
// record, so that no key keeps the whole record alive.
func DecodeAPIKey(v []byte, k *APIKey) error {
	if DecodeAPIKeyFast(v, k) {
		return nil
	}
	*k = APIKey{}
	if !gjson.ValidBytes(v) {
		return errors.New("invalid JSON")
	}
	// A view of v, not a copy: every string kept is cloned.
	root := gjson.Parse(codec.BytesString(v))
	if !root.IsObject() {
		return errors.New("not an object")
	}
	var err error
	root.ForEach(func(name, x gjson.Result) bool {
		switch name.Str {
		case "hash":
			err = codec.DecodeString(x, &k.Hash)
		case "account_id":
			err = codec.DecodeString(x, &k.AccountID)
		case "workspace_id":
			err = codec.DecodeString(x, &k.WorkspaceID)
		case "name":
			err = codec.DecodeString(x, &k.Name)
		case "label":
			err = codec.DecodeString(x, &k.Label)
		case "disabled":
			err = codec.DecodeBool(x, &k.Disabled)
		case "limit":
			if x.Type == gjson.Null {
				k.Limit = nil
				break
			}
			var a money.Amount
			if err = codec.DecodeAmount(x, &a); err == nil {
				k.Limit = &a
			}
		case "limit_reset":
			var s string
			if err = codec.DecodeString(x, &s); err == nil && x.Type != gjson.Null {
				k.LimitReset = money.Interval(s)
			}
		case "include_byok_in_limit":
			err = codec.DecodeBool(x, &k.IncludeBYOKInLimit)
		case "creator_user_id":
			err = codec.DecodeNullableString(x, &k.CreatorUserID)
		case "external_user":
			err = codec.DecodeNullableString(x, &k.ExternalUser)
		case "created_at":
			err = k.CreatedAt.UnmarshalJSON(codec.RawBytes(x))
		case "updated_at":
			err = k.UpdatedAt.UnmarshalJSON(codec.RawBytes(x))
		case "expires_at":
			if x.Type == gjson.Null {
				k.ExpiresAt = nil
				break
			}
			var t time.Time
			if err = t.UnmarshalJSON(codec.RawBytes(x)); err == nil {
				k.ExpiresAt = &t
			}
		case "seq":
			if x.Type != gjson.Null {
				k.Seq, err = strconv.ParseUint(x.Raw, 10, 64)
			}
		case "limit_by_admin":
			err = codec.DecodeBool(x, &k.LimitByAdmin)
		case "disabled_by_admin":
			err = codec.DecodeBool(x, &k.DisabledByAdmin)
		case "usage":
			err = codec.DecodeCounters(x, &k.Usage)
		case "byok_usage":
			err = codec.DecodeCounters(x, &k.BYOKUsage)
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
			if !codec.IsASCIILower(name.Str) {
				err = codec.ErrCaseFold
			}
		}
		if err != nil {
			err = fmt.Errorf("%s: %w", name.Str, err)
		}
		return err == nil
	})
	if errors.Is(err, codec.ErrCaseFold) {
		*k = APIKey{}
		return json.Unmarshal(v, k)
	}
	return err
}

// DecodeAPIKeyFast decodes a key record written by APIKeyJSON, member by
// member in its order, and reports false at the first byte it does not
// expect (another order, escapes or non-ASCII text in a string, white
// space, a number JSON would refuse): the caller then decodes the record
// with DecodeAPIKey. What it accepts is valid JSON that it decodes as
// encoding/json does.
func DecodeAPIKeyFast(v []byte, k *APIKey) bool {
	p := codec.NewParser(v)
	return FastAPIKey(&p, k) && p.Done()
}
