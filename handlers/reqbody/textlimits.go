package reqbody

import (
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
	"github.com/tollgate-dev/caddy-tollgate/textlimit"
)

// CheckTextField checks the string field name of a request body: within
// its length bound (textlimit's), free of control characters (line breaks
// and tabs only where the field may span lines) and of unpaired surrogate
// escapes, which decode to U+FFFD and could then not be matched. The 400
// names the field. Administrative bodies are also checked as a whole by
// jsoncheck.CheckText: no string in them is longer than
// jsoncheck.MaxTextLen as written.
func CheckTextField(name string, v gjson.Result) *apierror.Error {
	if err := CheckString(name, v.Str); err != nil {
		return err
	}
	if strings.IndexByte(v.Raw, '\\') >= 0 {
		// Escapes: only jsoncheck's text rules see a lone surrogate.
		if err := jsoncheck.CheckText([]byte(v.Raw), nil); err != nil {
			return apierror.BadRequest(name + ": " + strings.TrimPrefix(err.Error(), "JSON string: "))
		}
	}
	return nil
}

// CheckString checks a decoded string value of the field name against the
// field's bounds (textlimit.Check) as a 400 naming the field.
func CheckString(name, s string) *apierror.Error {
	if err := textlimit.Check(name, s); err != nil {
		return apierror.BadRequest(err.Error())
	}
	return nil
}
