// Package contextcompression is the context-compression plugin, the
// Caddy module tollgate.plugins.context_compression: middle-out
// compression, asked by `transforms: ["middle-out"]` or by the plugin
// (`{"id":"context-compression"}`, engine middle-out, its only one). A
// chat request whose prompt does not fit its model's context window with
// room for the answer loses messages from the middle of the conversation
// until it does. The leading system (and developer) messages, the first
// other message and the last one stay; an assistant message with tool
// calls and the tool messages answering it go together. The answer's
// header X-Context-Compression says what was removed. Compression is
// free; a request that asks for none pays a byte search.
package contextcompression

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/tokenizer"
)

func init() {
	caddy.RegisterModule(new(Compression))
}

// name is the plugin's id in a request's plugins array.
const name = "context-compression"

// engine is the plugin's one engine, and the transform that asks for it.
const engine = "middle-out"

// Header reports middle-out's work on the answer:
// "middle-out; removed_messages=N; removed_tokens=T".
const Header = "X-Context-Compression"

// Compression is the context-compression plugin. It takes no
// configuration.
type Compression struct{}

// CaddyModule returns the Caddy module information.
func (*Compression) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "tollgate.plugins.context_compression",
		New: func() caddy.Module { return new(Compression) },
	}
}

// UnmarshalCaddyfile reads the plugin's directive, which takes nothing:
//
//	context_compression
func (*Compression) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return plugin.NoOptions(d, "context_compression", "")
}

// Name implements plugin.Plugin.
func (*Compression) Name() string { return name }

// CheckEntry implements plugin.Plugin: an entry may name its engine,
// middle-out.
func (*Compression) CheckEntry(path string, entry gjson.Result) *apierror.Error {
	return plugin.CheckMembers(path, name, entry, func(member string, v gjson.Result) (bool, *apierror.Error) {
		if member != "engine" {
			return false, nil
		}
		if v.Str != engine {
			return true, apierror.BadRequest(path + `.engine: expected "middle-out"`)
		}
		return true, nil
	})
}

// Plan implements plugin.Plugin: the compression is done by FitPrompt,
// before the prompt is counted.
func (*Compression) Plan(*plugin.Request) (plugin.Run, *apierror.Error) { return nil, nil }

// FitPrompt implements plugin.PromptFitter: a chat request that asks for
// compression loses messages from its middle until it fits its smallest
// counted window; its run reports what went.
func (*Compression) FitPrompt(req *plugin.Request) ([]byte, plugin.Run, *apierror.Error) {
	ask, apiErr := asked(req.Transforms, req.Plugins)
	if apiErr != nil || !ask {
		return req.Body, nil, apiErr
	}
	if req.Kind != dialect.Chat {
		field := "transforms"
		if !req.Transforms.Exists() {
			field = "plugins"
		}
		return nil, nil, apierror.BadRequest(field + ": middle-out compression is served on /chat/completions only")
	}
	body, report, apiErr := middleOut(req)
	if apiErr != nil || report == "" {
		return req.Body, nil, apiErr
	}
	return body, &compressed{report: report}, nil
}

// asked reads the request's transforms and plugins: whether they ask for
// middle-out compression. transforms other than middle-out are a 400
// naming the field (the plugins were checked by CheckEntry).
func asked(transforms, plugins gjson.Result) (bool, *apierror.Error) {
	ask := false
	if transforms.Exists() && transforms.Type != gjson.Null {
		if !transforms.IsArray() {
			return false, apierror.BadRequest("transforms: expected an array of strings")
		}
		var apiErr *apierror.Error
		transforms.ForEach(func(i, t gjson.Result) bool {
			if t.Type != gjson.String || t.Str != engine {
				apiErr = apierror.BadRequest(fmt.Sprintf(`transforms[%d]: unknown transform %s (this gateway offers "middle-out")`, i.Int(), t.Raw))
				return false
			}
			ask = true
			return true
		})
		if apiErr != nil {
			return false, apiErr
		}
	}
	if _, i := plugin.Entry(plugins, name); i >= 0 {
		ask = true
	}
	return ask, nil
}

// compressed is a request's compression: what it removed.
type compressed struct{ report string }

// SetAnswerHeader implements plugin.AnswerHeader.
func (c *compressed) SetAnswerHeader(h http.Header) { h.Set(Header, c.report) }

// room is the answer's room middle-out leaves in a window of ctx tokens:
// the request's output limit, else a quarter of the window (at most the
// model's max_completion_tokens).
func room(maxTokens, ctx, maxCompletion int64) int64 {
	if maxTokens > 0 {
		return maxTokens
	}
	r := ctx / 4
	if maxCompletion > 0 {
		r = min(r, maxCompletion)
	}
	return r
}

// middleOut compresses a chat request's messages to fit the smallest
// context window of the route's models that count tokens, with room for
// the answer: the body and the report; "" when nothing changed (the
// prompt fits, or no model counts tokens).
func middleOut(req *plugin.Request) ([]byte, string, *apierror.Error) {
	var enc *tokenizer.Encoding
	var window, answer int64
	for i := range req.Models.Len() {
		m := req.Models.At(i)
		if m == nil || m.Tokenizer == nil || m.ContextLength <= 0 {
			continue
		}
		r := room(req.MaxTokens, m.ContextLength, m.MaxCompletionTokens)
		if enc == nil || m.ContextLength-r < window-answer {
			enc, window, answer = m.Tokenizer, m.ContextLength, r
		}
	}
	if enc == nil {
		return nil, "", nil
	}
	target := window - answer
	total, unbounded := req.Tokens.ChatPrompt(enc, req.Body)
	if unbounded || total <= target {
		return nil, "", nil
	}
	msgs := gjson.GetBytes(req.Body, "messages").Array()
	units := messageUnits(msgs)
	cost := make([]int64, len(msgs))
	for i, m := range msgs {
		cost[i] = req.Tokens.ChatMessage(enc, m)
	}
	// The units between the kept head (system messages and the first
	// other one) and the last message, removed nearest the middle first.
	head := 0
	for head < len(units) && isSystemMessage(msgs[units[head].start]) {
		head++
	}
	head++ // the first message of the conversation
	last := len(units) - 1
	if head > last-1 {
		return nil, "", nil // nothing between them to remove: the overflow's 400
	}
	removed := make([]bool, len(units))
	var removedMsgs, removedTokens int64
	for _, u := range middleFirst(head, last-1) {
		if total <= target {
			break
		}
		removed[u] = true
		for i := units[u].start; i < units[u].end; i++ {
			total -= cost[i]
			removedTokens += cost[i]
			removedMsgs++
		}
	}
	raw := make([]byte, 0, len(req.Body))
	raw = append(raw, '[')
	for u, unit := range units {
		if removed[u] {
			continue
		}
		for i := unit.start; i < unit.end; i++ {
			if len(raw) > 1 {
				raw = append(raw, ',')
			}
			raw = append(raw, msgs[i].Raw...)
		}
	}
	raw = append(raw, ']')
	body, err := sjson.SetRawBytes(req.Body, "messages", raw)
	if err != nil {
		return nil, "", apierror.BadRequest("messages: " + err.Error())
	}
	var report strings.Builder
	report.WriteString(engine + "; removed_messages=")
	report.WriteString(strconv.FormatInt(removedMsgs, 10))
	report.WriteString("; removed_tokens=")
	report.WriteString(strconv.FormatInt(removedTokens, 10))
	return body, report.String(), nil
}

// messageUnit is a run of messages removed together: one message, or an
// assistant message with tool calls and the tool messages that follow.
type messageUnit struct{ start, end int }

func messageUnits(msgs []gjson.Result) []messageUnit {
	var units []messageUnit
	for i := 0; i < len(msgs); {
		end := i + 1
		if m := msgs[i]; m.Get("role").Str == "assistant" && m.Get("tool_calls").IsArray() {
			for end < len(msgs) && msgs[end].Get("role").Str == "tool" {
				end++
			}
		}
		units = append(units, messageUnit{i, end})
		i = end
	}
	return units
}

func isSystemMessage(m gjson.Result) bool {
	r := m.Get("role").Str
	return r == "system" || r == "developer"
}

// middleFirst lists lo..hi from the middle outwards.
func middleFirst(lo, hi int) []int {
	n := hi - lo + 1
	mid := (lo + hi) / 2
	out := append(make([]int, 0, n), mid)
	for d := 1; len(out) < n; d++ {
		if mid+d <= hi {
			out = append(out, mid+d)
		}
		if mid-d >= lo {
			out = append(out, mid-d)
		}
	}
	return out
}

// Interface guards
var (
	_ plugin.Plugin         = (*Compression)(nil)
	_ plugin.PromptFitter   = (*Compression)(nil)
	_ caddyfile.Unmarshaler = (*Compression)(nil)
	_ plugin.AnswerHeader   = (*compressed)(nil)
)
