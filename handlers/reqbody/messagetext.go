package reqbody

import (
	"strings"

	"github.com/tidwall/gjson"
)

// LastUserText is the text of the last user message of a chat body, or of
// the last user input item of a Responses body (responses): what web
// search takes as its query and web-fetch reads for URLs.
func LastUserText(body []byte, responses bool) string {
	if responses {
		in := gjson.GetBytes(body, "input")
		if in.Type == gjson.String {
			return in.Str
		}
		text := ""
		for _, it := range in.Array() {
			if it.Get("role").Str == "user" {
				text = ContentText(it.Get("content"))
			}
		}
		return strings.TrimSpace(text)
	}
	text := ""
	for _, m := range gjson.GetBytes(body, "messages").Array() {
		if m.Get("role").Str == "user" {
			text = ContentText(m.Get("content"))
		}
	}
	return strings.TrimSpace(text)
}

// ContentText returns the text of a message content: a string, or the text
// fields of an array of parts, each followed by a space so that words of
// adjacent parts stay apart. Parts without text, such as images, give
// nothing.
func ContentText(content gjson.Result) string {
	if content.Type == gjson.String {
		return content.Str
	}
	if !content.IsArray() {
		return ""
	}
	var b strings.Builder
	for _, part := range content.Array() {
		if t := part.Get("text"); t.Type == gjson.String {
			b.WriteString(t.Str)
			b.WriteByte(' ')
		}
	}
	return b.String()
}
