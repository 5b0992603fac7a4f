package messages

import (
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/rawjson"
)

// A Claude Code request is mostly long texts (its system prompt, tool
// descriptions, file contents) that the translation copies as they are.
// gjson's ForEach unescapes every string member it passes; members and
// elements are walked with package rawjson instead, with texts kept as
// their JSON text (member), so that the translation costs one scan of the
// body.

func eachMember(raw string, fn func(key, val string) bool) { rawjson.EachMember(raw, fn) }
func eachElem(raw string, fn func(val string) bool)        { rawjson.EachElem(raw, fn) }

func member(raw string, unescape bool) gjson.Result { return rawjson.Member(raw, unescape) }
