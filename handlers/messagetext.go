package handlers

import (
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
)

// contentText returns the text of a message content: a string, or the text
// fields of an array of parts, joined by spaces so that words of adjacent
// parts stay apart. Parts without text, such as images, give nothing.
func contentText(content gjson.Result) string {
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

// lastUserText is the text of the last user message (chat) or input item
// (Responses).
func lastUserText(body []byte, kind dialect.Kind) string {
	if kind == dialect.Responses {
		in := gjson.GetBytes(body, "input")
		if in.Type == gjson.String {
			return in.Str
		}
		text := ""
		for _, it := range in.Array() {
			if it.Get("role").Str == "user" {
				text = contentText(it.Get("content"))
			}
		}
		return strings.TrimSpace(text)
	}
	text := ""
	for _, m := range gjson.GetBytes(body, "messages").Array() {
		if m.Get("role").Str == "user" {
			text = contentText(m.Get("content"))
		}
	}
	return strings.TrimSpace(text)
}
