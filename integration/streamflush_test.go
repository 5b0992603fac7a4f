package integration

// Streams pass through the gateway event by event: its provider proxies
// keep reverse_proxy's default flush interval, under which Caddy flushes
// every write of an event stream by itself.

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// gatedStream is a chat provider whose streamed answer sends its next text
// event only once the test says the client has read the previous one; it
// gives up (ending the stream early) after gateWait without word.
type gatedStream struct {
	srv    *httptest.Server
	read   chan int    // the client has read text event i
	gaveUp atomic.Bool // a gate timed out: the gateway held an event back
	texts  []string
}

const gateWait = 5 * time.Second

func newGatedStream(t *testing.T, texts ...string) *gatedStream {
	t.Helper()
	g := &gatedStream{read: make(chan int, len(texts)), texts: texts}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
			return
		}
		if body, _ := io.ReadAll(r.Body); offContract(t, w, r, body) {
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		chunk := func(delta, finish string) {
			fmt.Fprintf(w, `data: {"id":"chatcmpl-gated","object":"chat.completion.chunk","created":1735689600,"model":"gated",`+
				`"choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`+"\n\n", delta, finish)
			_ = rc.Flush()
		}
		for i, text := range g.texts {
			if i > 0 {
				select {
				case <-g.read:
				case <-time.After(gateWait):
					g.gaveUp.Store(true)
					return // no [DONE]: the stream breaks
				case <-r.Context().Done():
					return
				}
			}
			delta := fmt.Sprintf(`{"content":%q}`, text)
			if i == 0 {
				delta = fmt.Sprintf(`{"role":"assistant","content":%q}`, text)
			}
			chunk(delta, "null")
		}
		<-g.read // the last text event reached the client
		chunk(`{}`, `"stop"`)
		fmt.Fprint(w, `data: {"id":"chatcmpl-gated","object":"chat.completion.chunk","created":1735689600,"model":"gated",`+
			`"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":4,"total_tokens":16}}`+"\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(g.srv.Close)
	return g
}

// TestStreamEventByEvent: each text event of a provider's stream reaches
// the client before the provider sends the next, on the chat route (the
// stream passed through the meter) and on the Messages route (translated
// event by event), and the chat stream still ends with its charge.
func TestStreamEventByEvent(t *testing.T) {
	texts := []string{"The", " sea", " is", " wide"}
	g := newGatedStream(t, texts...)
	startInProcessWith(t, withModels(t, modelBlock("gated/stream", "0.000001", "0.000002",
		testProvider{name: "gated", baseURL: g.srv.URL + "/v1", apiKey: "gated"})))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"gated"}`)

	for _, tc := range []struct {
		route, body string
		text        func(sseEvent) string
		last        func(sseEvent) bool
	}{
		{"/chat/completions", `{"model":"gated/stream","stream":true,"messages":[{"role":"user","content":"Describe the sea."}]}`,
			deltaText, func(ev sseEvent) bool { return ev.Data == "[DONE]" }},
		{"/messages", `{"model":"gated/stream","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"Describe the sea."}]}`,
			messagesDeltaText, func(ev sseEvent) bool { return ev.Event == "message_stop" }},
	} {
		t.Run(strings.TrimPrefix(tc.route, "/"), func(t *testing.T) {
			res, err := c.send(tc.route, key, tc.body, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			if res.StatusCode != 200 {
				t.Fatalf("status %d", res.StatusCode)
			}
			r := bufio.NewReader(res.Body)
			got, ended, charged := 0, false, false
			for !ended {
				ev, err := readEvent(r)
				if err != nil {
					t.Fatalf("after %d text events: %v", got, err)
				}
				if g.gaveUp.Load() {
					t.Fatalf("the gateway held text event %d back until the provider gave up", got)
				}
				if d := tc.text(ev); d != "" {
					if got >= len(texts) || d != texts[got] {
						t.Fatalf("text event %d: %q", got, d)
					}
					g.read <- got // let the provider send the next
					got++
				}
				ended = tc.last(ev)
				charged = charged || gjson.Get(ev.Data, "usage.cost").Exists()
			}
			if got != len(texts) {
				t.Fatalf("%d text events, want %d", got, len(texts))
			}
			if tc.route == "/chat/completions" && !charged {
				t.Fatal("the stream carries no usage.cost")
			}
		})
	}
}

// messagesDeltaText is the text a Messages stream event carries.
func messagesDeltaText(ev sseEvent) string {
	if ev.Event != "content_block_delta" {
		return ""
	}
	return gjson.Get(ev.Data, "delta.text").Str
}
