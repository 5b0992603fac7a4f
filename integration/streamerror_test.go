package integration

// Errors after a stream has begun: the status stays 200, the
// client gets what was delivered, then an error event and [DONE]; the
// partial output is charged by the abort rule, a stream that broke before
// any output is not charged.

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// earlyBreakUpstream is a provider whose streams break before any text:
// after the opening event (chat: the role chunk; Responses:
// response.created), or, for a model containing "silent", right after the
// headers.
func earlyBreakUpstream(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := r.Body.Read(buf)
			body.WriteString(string(buf[:n]))
			if err != nil {
				break
			}
		}
		if offContract(t, w, r, []byte(body.String())) {
			return
		}
		model := gjson.Get(body.String(), "model").Str
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		if !strings.Contains(model, "silent") {
			if strings.HasSuffix(r.URL.Path, "/responses") {
				fmt.Fprintf(w, "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"model\":%q,\"status\":\"in_progress\",\"output\":[]}}\n\n", model)
			} else {
				fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n", model)
			}
		}
		_ = http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler) // cut the connection: no usage, no [DONE]
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// openStream sends a streamed request that must be answered 200 with a
// generation id, and reads the stream to its end.
func openStream(t *testing.T, c *client, key, path, body string) (evs []sseEvent, genID string) {
	t.Helper()
	res, err := c.send(path, key, body, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, Content-Type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	evs, err = readStream(res.Body)
	if err != nil {
		t.Fatalf("the stream did not end cleanly: %v (events %v)", err, evs)
	}
	return evs, res.Header.Get("X-Generation-Id")
}

// expectChatStreamError checks the chat chunk that reports the error, then
// [DONE], at the end of evs.
func expectChatStreamError(t *testing.T, evs []sseEvent, genID, model, provider string) {
	t.Helper()
	n := len(evs)
	if n < 2 || evs[n-1].Data != "[DONE]" {
		t.Fatalf("stream does not end with an error chunk and [DONE]: %v", evs)
	}
	e := gjson.Parse(evs[n-2].Data)
	if e.Get("object").Str != "chat.completion.chunk" || e.Get("id").Str != genID || genID == "" ||
		e.Get("model").Str != model || e.Get("provider").Str != provider {
		t.Fatalf("error chunk %s (generation %q)", evs[n-2].Data, genID)
	}
	if created := e.Get("created"); created.Type != gjson.Number || time.Since(time.Unix(created.Int(), 0)) > time.Minute {
		t.Fatalf("error chunk created: %s", evs[n-2].Data)
	}
	if code := e.Get("error.code"); code.Raw != "502" || e.Get("error.message").Str == "" {
		t.Fatalf("error chunk error: %s", evs[n-2].Data)
	}
	ch := e.Get("choices")
	if len(ch.Array()) != 1 || ch.Get("0.finish_reason").Str != "error" || ch.Get("0.index").Raw != "0" {
		t.Fatalf("error chunk choices: %s", evs[n-2].Data)
	}
}

// expectResponsesStreamError checks the response.failed event, then [DONE],
// at the end of evs, numbered after the events before it.
func expectResponsesStreamError(t *testing.T, evs []sseEvent, model string) {
	t.Helper()
	n := len(evs)
	if n < 2 || evs[n-1].Data != "[DONE]" {
		t.Fatalf("stream does not end with response.failed and [DONE]: %v", evs)
	}
	e := gjson.Parse(evs[n-2].Data)
	if evs[n-2].Event != "response.failed" || e.Get("type").Str != "response.failed" {
		t.Fatalf("last event %q: %s", evs[n-2].Event, evs[n-2].Data)
	}
	if n >= 3 {
		if prev := gjson.Get(evs[n-3].Data, "sequence_number"); e.Get("sequence_number").Int() != prev.Int()+1 {
			t.Fatalf("response.failed sequence_number %s after %s", e.Get("sequence_number").Raw, prev.Raw)
		}
	}
	r := e.Get("response")
	if r.Get("status").Str != "failed" || r.Get("model").Str != model || r.Get("error.message").Str == "" || r.Get("error.code").Str == "" {
		t.Fatalf("response.failed: %s", evs[n-2].Data)
	}
}

func TestStreamErrorAfterStart(t *testing.T) {
	early := "http://" + earlyBreakUpstream(t) + "/v1"
	startInProcessWith(t, chain(
		withModel(t, "tollgate-mock-stream-break"),
		withModels(t,
			modelBlock("early/break", "0.000001", "0.000002", testProvider{name: "early", baseURL: early, apiKey: "k"}),
			modelBlock("early/silent", "0.000001", "0.000002", testProvider{name: "early", baseURL: early, apiKey: "k"}),
		)))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, hash := c.newKey(org.MgmtKey, `{"name":"streams","limit":2}`)
	const model = "tollgate-mock-stream-break"

	t.Run("chat", func(t *testing.T) {
		body := `{"model":"` + model + `","stream":true,"max_tokens":40,"messages":[{"role":"user","content":"a stream that breaks"}]}`
		before := c.snapshot(key, org.MgmtKey)
		evs, genID := openStream(t, c, key, "/chat/completions", body)
		// The content chunks, in order, before the error chunk.
		var deltas []string
		for _, ev := range evs[:len(evs)-2] {
			d := gjson.Parse(ev.Data)
			if d.Get("error").Exists() || d.Get("usage").Exists() || d.Get("choices.0.finish_reason").Str != "" {
				t.Fatalf("unexpected chunk before the error chunk: %s", ev.Data)
			}
			if s := deltaText(ev); s != "" {
				deltas = append(deltas, s)
			}
		}
		if got := strings.Join(deltas, "|"); got != "Mock| answer| from" {
			t.Fatalf("content chunks %q", got)
		}
		expectChatStreamError(t, evs, genID, model, "mock")
		// Charged before the client saw [DONE]: prompt estimate + ceil of
		// the delivered text's bytes / 4.
		want := tokenCost(promptEstimate(body), textEstimate(len("Mock answer from")))
		expectCharged(t, before, c.snapshot(key, org.MgmtKey), want, "chat stream-break")
	})

	t.Run("responses", func(t *testing.T) {
		body := `{"model":"` + model + `","stream":true,"max_output_tokens":40,"input":"a responses stream that breaks"}`
		before := c.snapshot(key, org.MgmtKey)
		evs, _ := openStream(t, c, key, "/responses", body)
		var types []string
		var text strings.Builder
		for _, ev := range evs[:len(evs)-2] {
			types = append(types, gjson.Get(ev.Data, "type").Str)
			text.WriteString(deltaText(ev))
		}
		wantTypes := "response.created,response.in_progress,response.output_item.added,response.content_part.added," +
			"response.output_text.delta,response.output_text.delta,response.output_text.delta"
		if strings.Join(types, ",") != wantTypes || text.String() != "Mock answer from" {
			t.Fatalf("events before the failure: %v, text %q", types, text.String())
		}
		expectResponsesStreamError(t, evs, model)
		want := tokenCost(promptEstimate(body), textEstimate(text.Len()))
		expectCharged(t, before, c.snapshot(key, org.MgmtKey), want, "responses stream-break")
	})

	t.Run("break before any content", func(t *testing.T) {
		for _, m := range []string{"early/break", "early/silent"} {
			chat := `{"model":"` + m + `","stream":true,"max_tokens":40,"messages":[{"role":"user","content":"nothing comes"}]}`
			before := c.snapshot(key, org.MgmtKey)
			evs, genID := openStream(t, c, key, "/chat/completions", chat)
			// The upstream's opening chunk (none for early/silent), the
			// error chunk and [DONE].
			if want := map[string]int{"early/break": 3, "early/silent": 2}[m]; len(evs) != want {
				t.Fatalf("%s: %d events, want %d: %v", m, len(evs), want, evs)
			}
			for _, ev := range evs[:len(evs)-2] {
				if deltaText(ev) != "" {
					t.Fatalf("%s: text before the break: %s", m, ev.Data)
				}
			}
			expectChatStreamError(t, evs, genID, m, "early")
			expectCharged(t, before, c.snapshot(key, org.MgmtKey), 0, m+" chat")

			resp := `{"model":"` + m + `","stream":true,"max_output_tokens":40,"input":"nothing comes"}`
			evs, _ = openStream(t, c, key, "/responses", resp)
			if want := map[string]int{"early/break": 3, "early/silent": 2}[m]; len(evs) != want {
				t.Fatalf("%s responses: %d events, want %d: %v", m, len(evs), want, evs)
			}
			expectResponsesStreamError(t, evs, m)
			expectCharged(t, before, c.snapshot(key, org.MgmtKey), 0, m+" responses")
		}
	})

	// Every hold was released.
	expectNoHolds(t, c, org.MgmtKey, key, hash)
}
