package dialect

import (
	"bytes"
	"net/http"

	"github.com/tidwall/gjson"
)

// ErrorBody reads the common error shape {"error":{"message","code"|"type"}}
// (OpenAI's, Anthropic's, Google's): the code, else the type; nil without
// either.
func ErrorBody(body []byte) (code any, message string) {
	if len(body) == 0 {
		return nil, ""
	}
	r := gjson.GetManyBytes(body, "error.message", "error.code", "error.type")
	message = r[0].Str
	if r[1].Exists() && r[1].Type != gjson.Null {
		code = r[1].Value()
	} else if r[2].Str != "" {
		code = r[2].Str
	}
	return code, message
}

// ClearCredentials removes every dialect's credential and version
// headers (canonical names), so that a fallback never carries the
// previous provider's.
func ClearCredentials(h http.Header) {
	delete(h, "Authorization")
	delete(h, "X-Api-Key")
	delete(h, "Api-Key")
	delete(h, "X-Goog-Api-Key")
	delete(h, "Anthropic-Version")
}

// WithMembers adds members (JSON text without braces) to a JSON object.
func WithMembers(obj []byte, members string) []byte {
	if members == "" {
		return obj
	}
	end := bytes.LastIndexByte(obj, '}')
	if end < 0 {
		return obj
	}
	out := make([]byte, 0, len(obj)+len(members)+1)
	out = append(out, obj[:end]...)
	if head := bytes.TrimSpace(obj[:end]); len(head) > 0 && head[len(head)-1] != '{' {
		out = append(out, ',')
	}
	out = append(out, members...)
	return append(out, obj[end:]...)
}
