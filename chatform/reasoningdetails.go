package chatform

import (
	"strconv"

	"github.com/tidwall/gjson"
)

// Reasoning detail types the client may send back that no provider
// takes as input: they are checked, then left out.
const (
	ReasoningSummary       = "reasoning.summary"
	ReasoningServerToolUse = "reasoning.server_tool_call"
)

// DetailError is a reasoning_details entry of a wrong shape: Field is the
// path below reasoning_details ("[1].signature").
type DetailError struct{ Field, Problem string }

func (e *DetailError) Error() string { return e.Field + ": " + e.Problem }

// ReadReasoningDetails reads an assistant message's reasoning_details as
// sent back by a client: the text and encrypted entries, in order, a
// text entry's pieces (consecutive entries with the same index, as a
// stream gave them) joined into one. Summaries and server tool calls are
// checked and left out. Absent or null is no details.
func ReadReasoningDetails(v gjson.Result) ([]ReasoningDetail, *DetailError) {
	if !v.Exists() || v.Type == gjson.Null {
		return nil, nil
	}
	if !v.IsArray() {
		return nil, &DetailError{"", "expected an array of reasoning details"}
	}
	var out []ReasoningDetail
	var bad *DetailError
	j, last := -1, -1 // last: the index of the text entry out ends with
	v.ForEach(func(_, e gjson.Result) bool {
		j++
		at := func(member string) string { return "[" + strconv.Itoa(j) + "]" + member }
		if !e.IsObject() {
			bad = &DetailError{at(""), "expected an object"}
			return false
		}
		var f [8]gjson.Result
		for k, name := range [...]string{"type", "text", "signature", "data", "summary", "format", "id", "index"} {
			f[k] = e.Get(name)
		}
		typ, text, sig, data, summary, format, id, index := f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]
		for k, name := range [...]string{".text", ".signature", ".data", ".summary", ".format", ".id"} {
			if x := f[k+1]; x.Exists() && x.Type != gjson.Null && x.Type != gjson.String {
				bad = &DetailError{at(name), "expected a string"}
				return false
			}
		}
		i := -1
		if index.Exists() && index.Type != gjson.Null {
			if index.Type != gjson.Number || index.Float() != float64(index.Int()) || index.Int() < 0 {
				bad = &DetailError{at(".index"), "expected a non-negative integer"}
				return false
			}
			i = int(index.Int())
		}
		d := ReasoningDetail{Type: typ.Str, Format: format.Str, ID: id.Str, Index: max(i, 0)}
		switch typ.Str {
		case ReasoningText:
			if n := len(out); i >= 0 && i == last && out[n-1].Type == ReasoningText {
				out[n-1].Text += text.Str
				out[n-1].Signature += sig.Str
				return true
			}
			d.Text, d.Signature = text.Str, sig.Str
		case ReasoningEncrypted:
			if data.Type != gjson.String || data.Str == "" {
				bad = &DetailError{at(".data"), "required string"}
				return false
			}
			d.Data = data.Str
		case ReasoningSummary:
			if summary.Type != gjson.String {
				bad = &DetailError{at(".summary"), "required string"}
			}
			return bad == nil
		case ReasoningServerToolUse:
			return true
		default:
			bad = &DetailError{at(".type"), "expected reasoning.text, reasoning.encrypted, reasoning.summary or reasoning.server_tool_call"}
			return false
		}
		out = append(out, d)
		last = -1
		if typ.Str == ReasoningText {
			last = i
		}
		return true
	})
	if bad != nil {
		return nil, bad
	}
	return out, nil
}
