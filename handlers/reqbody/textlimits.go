package reqbody

import (
	"fmt"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/handlers/apierror"
	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// Bounds of the string fields of request bodies, in characters (Unicode
// code points), as the README's limits list them. Administrative bodies are also checked as a whole by
// jsoncheck.CheckText: no string in them is longer than
// jsoncheck.MaxTextLen as written.
const (
	// MaxNameLen bounds names, ids, slugs, labels, e-mail addresses,
	// model ids, end-user ids: every string field not listed below.
	MaxNameLen = 256
	// MaxDescriptionLen bounds descriptions and notes, which may span
	// lines. A generation feedback comment has its own bound,
	// storage.MaxFeedbackComment (1000).
	MaxDescriptionLen = 1024
	// MaxURLLen bounds URLs (a private endpoint's base_url).
	MaxURLLen = 2048
	// MaxSecretLen bounds provider keys (BYOK key, a private endpoint's
	// api_key).
	MaxSecretLen = 8192
)

// textLimit is the longest value of a string field and whether it may
// hold line breaks and tabs.
func textLimit(name string) (max int, multiline bool) {
	switch name {
	case "description", "note":
		return MaxDescriptionLen, true
	case "comment":
		return storage.MaxFeedbackComment, true
	case "base_url":
		return MaxURLLen, false
	case "key", "api_key":
		// Pasted keys end in a line break; their own checks trim it and
		// refuse any inside.
		return MaxSecretLen, true
	}
	return MaxNameLen, false
}

// CheckTextField checks the string field name of a request body: within
// its length bound, free of control characters (line breaks and tabs only
// where the field may span lines) and of unpaired surrogate escapes, which
// decode to U+FFFD and could then not be matched. The 400 names the field.
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
// field's bounds: its length and, unless the field may span lines, no
// control characters. Bodies decoded elsewhere (SCIM) use it after
// jsoncheck has refused unpaired surrogates.
func CheckString(name, s string) *apierror.Error {
	max, multiline := textLimit(name)
	n := 0
	for _, r := range s {
		if jsoncheck.IsControl(r) || !multiline && (r == '\n' || r == '\r' || r == '\t') {
			return apierror.BadRequest(name + ": control characters are not allowed")
		}
		n++
	}
	if n > max {
		return apierror.BadRequest(fmt.Sprintf("%s: expected at most %d characters", name, max))
	}
	return nil
}
