package handlers

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/tokenizer"
)

// Middle-out compression (`transforms: ["middle-out"]`, or the
// context-compression plugin): a chat request whose prompt does not fit
// its model's context window with room for the answer loses messages
// from the middle of the conversation until it does. The leading system
// (and developer) messages, the first other message and the last one stay;
// an assistant message with tool calls and the tool messages answering it
// go together. The answer's CompressionHeader says what was removed.

// CompressionHeader reports middle-out's work on the answer:
// "middle-out; removed_messages=N; removed_tokens=T".
const CompressionHeader = "X-Context-Compression"

// compressionAsked reads the request's transforms and plugins: whether
// they ask for middle-out compression. transforms other than middle-out
// are a 400 naming the field (the plugins were checked by normalize.CheckPlugins).
func compressionAsked(transforms, plugins gjson.Result) (bool, *apierror.Error) {
	asked := false
	if transforms.Exists() && transforms.Type != gjson.Null {
		if !transforms.IsArray() {
			return false, apierror.BadRequest("transforms: expected an array of strings")
		}
		for i, t := range transforms.Array() {
			if t.Type != gjson.String || t.Str != "middle-out" {
				return false, apierror.BadRequest(fmt.Sprintf(`transforms[%d]: unknown transform %s (this gateway offers "middle-out")`, i, t.Raw))
			}
			asked = true
		}
	}
	for _, p := range plugins.Array() {
		if p.Get("id").Str == "context-compression" && p.Get("enabled").Type != gjson.False {
			asked = true
		}
	}
	return asked, nil
}

// compressionRoom is the answer's room middle-out leaves in a window of
// ctx tokens: the request's output limit, else a quarter of the window
// (at most the model's max_completion_tokens).
func compressionRoom(maxTokens, ctx, maxCompletion int64) int64 {
	if maxTokens > 0 {
		return maxTokens
	}
	room := ctx / 4
	if maxCompletion > 0 {
		room = min(room, maxCompletion)
	}
	return room
}

// middleOut compresses a chat request's messages to fit the smallest
// context window of the attempts whose model counts tokens, with room
// for the answer. Nothing changes when the prompt fits, or when no
// attempt's model counts tokens.
func (rt *Route) middleOut(mediaPart int64) *apierror.Error {
	var enc *tokenizer.Encoding
	var ctx, room int64
	for _, a := range rt.Attempts {
		m := a.Model
		if m.Tokenizer == nil || m.ContextLength <= 0 {
			continue
		}
		r := compressionRoom(rt.MaxTokens, m.ContextLength, m.MaxCompletionTokens)
		if enc == nil || m.ContextLength-r < ctx-room {
			enc, ctx, room = m.Tokenizer, m.ContextLength, r
		}
	}
	if enc == nil {
		return nil
	}
	target := ctx - room
	total, unbounded := countChatBody(enc, rt.body, mediaPart)
	if unbounded || total <= target {
		return nil
	}
	msgs := gjson.GetBytes(rt.body, "messages").Array()
	units := messageUnits(msgs)
	// What a message counts, as countChatBody counts it.
	cost := make([]int64, len(msgs))
	for i, m := range msgs {
		c := promptCounter{enc: enc, mediaPart: mediaPart, ctx: context.Background()}
		c.message(m)
		cost[i] = c.tokens
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
		return nil // nothing between them to remove: the overflow's 400
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
	raw := make([]byte, 0, len(rt.body))
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
	body, err := sjson.SetRawBytes(rt.body, "messages", raw)
	if err != nil {
		return apierror.BadRequest("messages: " + err.Error())
	}
	rt.body = body
	rt.compressed = "middle-out; removed_messages=" + strconv.FormatInt(removedMsgs, 10) +
		"; removed_tokens=" + strconv.FormatInt(removedTokens, 10)
	return nil
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

// setCompressionHeader tells the client what middle-out removed.
func setCompressionHeader(h http.Header, route *Route) {
	if route != nil && route.compressed != "" {
		h.Set(CompressionHeader, route.compressed)
	}
}
