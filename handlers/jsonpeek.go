package handlers

import (
	"unsafe"

	"github.com/tidwall/gjson"
)

// peekJSON is gjson.GetBytes without its copies: the result's Raw and Str
// alias doc. gjson.GetBytes copies each string it returns, which on a
// streamed answer was three allocations per event for values that are
// only measured or spliced around. Use the result before doc changes, and
// strings.Clone what is kept.
func peekJSON(doc []byte, path string) gjson.Result {
	if len(doc) == 0 {
		return gjson.Result{}
	}
	return gjson.Get(unsafe.String(unsafe.SliceData(doc), len(doc)), path)
}
