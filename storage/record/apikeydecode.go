package record

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tidwall/gjson"

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
		err = decodeAPIKeyMember(name.Str, x, k)
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
