package messages

import (
	"bytes"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// FoldSystem moves the system messages inside a Messages request's
// messages (Claude Code's, which Anthropic takes with the
// mid-conversation-system beta) into its top-level system, for an
// Anthropic-style provider that takes a system prompt only there: the
// top-level system (a string as one text block) is followed by each
// system message's blocks (a string as one text block), in order, their
// cache_control kept. A body with no system message is returned as it
// is. The instructions then come before the whole conversation rather
// than at their place: the closest the provider can take.
func FoldSystem(body []byte) ([]byte, error) {
	if !bytes.Contains(body, []byte(`"system"`)) {
		return body, nil
	}
	r := gjson.GetManyBytes(body, "messages", "system")
	msgs, system := r[0], r[1]
	if !msgs.IsArray() {
		return body, nil
	}
	var kept, blocks []string
	folded := false
	var err error
	for i, m := range msgs.Array() {
		if m.Get("role").Str != "system" {
			kept = append(kept, m.Raw)
			continue
		}
		folded = true
		if blocks, err = appendSystemBlocks(blocks, m.Get("content"), msgPath(i)+".content"); err != nil {
			break
		}
	}
	if err != nil || !folded {
		return body, err
	}
	top, err := appendSystemBlocks(nil, system, "system")
	if err != nil {
		return nil, err
	}
	blocks = append(top, blocks...)
	out, err := sjson.SetRawBytes(body, "messages", []byte("["+strings.Join(kept, ",")+"]"))
	if err != nil || len(blocks) == 0 {
		return out, err
	}
	return sjson.SetRawBytes(out, "system", []byte("["+strings.Join(blocks, ",")+"]"))
}

// appendSystemBlocks appends the text blocks of a system prompt (a string
// or blocks; absent, null or "" for none) to blocks; field names it in an
// error.
func appendSystemBlocks(blocks []string, v gjson.Result, field string) ([]string, error) {
	switch {
	case !v.Exists() || v.Type == gjson.Null:
	case v.Type == gjson.String:
		if v.Str != "" {
			blocks = append(blocks, `{"type":"text","text":`+v.Raw+`}`)
		}
	case v.IsArray():
		for _, b := range v.Array() {
			blocks = append(blocks, b.Raw)
		}
	default:
		return nil, fieldErr(field, "a string or text blocks")
	}
	return blocks, nil
}
