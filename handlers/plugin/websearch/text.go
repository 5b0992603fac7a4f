package websearch

import (
	"strings"

	"github.com/tidwall/gjson"
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
