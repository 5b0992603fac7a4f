package answer

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/sse"
)

// The meter reads a Messages stream as it passes: text and tool input
// delivered, message_start's prompt, message_delta's usage (the prompt
// with the cached tokens), which waits for the charge with message_stop.
func TestMeterWriterMessagesStream(t *testing.T) {
	mw, log := streamWriter(t, "messages")
	ev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	start := ev("message_start", `{"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":7,"cache_read_input_tokens":3,"output_tokens":1}}}`)
	text := ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi there"}}`)
	args := ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{}"}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"thinking_delta","thinking":"hm"}}`)
	stop := ev("content_block_stop", `{"type":"content_block_stop","index":1}`)
	delta := ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":4}}`)
	end := ev("message_stop", `{"type":"message_stop"}`)
	for _, e := range []string{start, text, args, stop, delta, end} {
		mustWrite(t, mw, e)
	}
	if log.body() != start+text+args+stop {
		t.Fatalf("client got %q before the charge", log.body())
	}
	if !mw.Usage.OK || mw.Usage.Prompt != 10 || mw.Usage.Completion != 4 || mw.Delivered != len("Hi there{}hm") ||
		!mw.SawDone || mw.Finish != "max_tokens" || mw.UpstreamID != "msg_1" {
		t.Fatalf("usage %+v delivered %d sawDone %v finish %q id %q", mw.Usage, mw.Delivered, mw.SawDone, mw.Finish, mw.UpstreamID)
	}
	if err := mw.SendTail(testAmount("0.000018")); err != nil {
		t.Fatal(err)
	}
	wantDelta := ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":4,"cost":0.000018}}`)
	if got := strings.TrimPrefix(log.body(), start+text+args+stop); got != wantDelta+end {
		t.Fatalf("tail %q\nwant %q", got, wantDelta+end)
	}

	// A message_delta with input_tokens counts it and its cached tokens.
	mw, _ = streamWriter(t, "messages")
	mustWrite(t, mw, start+ev("message_delta", `{"type":"message_delta","delta":{},"usage":{"input_tokens":20,"cache_creation_input_tokens":5,"output_tokens":2}}`))
	if mw.Usage.Prompt != 25 || mw.Usage.Completion != 2 {
		t.Fatalf("usage %+v", mw.Usage)
	}

	// Without usage, the charge's usage goes into message_delta.
	mw, log = streamWriter(t, "messages")
	mustWrite(t, mw, ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":null}`)+end)
	b := NewUsageBill(18_000, billing.Pricing{Prompt: 1_000_000, Completion: 2_000_000}, billing.Usage{PromptTokens: 10, CompletionTokens: 4}, false)
	mw.Bill = &b
	if mw.Usage.OK {
		t.Fatal("usage null read as reported")
	}
	if err := mw.SendTail(testAmount("0.000018")); err != nil {
		t.Fatal(err)
	}
	u := gjson.GetBytes(sse.Data([]byte(strings.SplitAfter(log.body(), "\n\n")[0])), "usage")
	if u.Get("input_tokens").Int() != 10 || u.Get("output_tokens").Int() != 4 || u.Get("cost").Raw != "0.000018" {
		t.Fatalf("billed usage %s in %q", u.Raw, log.body())
	}
}

func TestMeterWriterMessagesJSON(t *testing.T) {
	body := `{"id":"gen-1","type":"message","content":[{"type":"text","text":"Hello"}],"stop_reason":"end_turn",` +
		`"usage":{"input_tokens":8,"output_tokens":3,"cache_creation_input_tokens":1,"cache_read_input_tokens":4}}`
	log := newWriteLog()
	mw := NewWriter(log, "messages")
	mw.Header().Set("Content-Type", "application/json")
	mw.WriteHeader(http.StatusOK)
	mustWrite(t, mw, body)
	if !mw.UsableJSON() || !mw.Usage.OK || mw.Usage.Prompt != 13 || mw.Usage.Completion != 3 || mw.Finish != "end_turn" {
		t.Fatalf("usage %+v finish %q", mw.Usage, mw.Finish)
	}
	if err := mw.SendJSON(testAmount("0.000019"), "gen-1"); err != nil {
		t.Fatal(err)
	}
	if got := gjson.Get(log.body(), "usage.cost").Raw; got != "0.000019" {
		t.Fatalf("answer %s", log.body())
	}
}
