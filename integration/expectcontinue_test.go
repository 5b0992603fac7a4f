package integration

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// TestExpectContinue: a client sending Expect: 100-continue (as curl does
// above 1 MB) gets its answer, plain and streamed, charged exactly once,
// and a provider's 400 stays a 400 charging nothing. reverse_proxy passes
// the header on, so the provider answers 100 Continue before its final
// status: that interim response must not be taken for the answer.
func TestExpectContinue(t *testing.T) {
	startInProcessWith(t, withModel(t, "tollgate-mock-error-400"))
	c := newClient(t, gatewayAddr, adminAddr)
	// The transport waits for 100 Continue before it sends the body.
	c.http.Transport = &http.Transport{ExpectContinueTimeout: 10 * time.Second}
	tn := c.newTenant("personal", "10")
	key, _ := c.newKey(tn.MgmtKey, `{"name":"expect"}`)
	expect := map[string]string{"Expect": "100-continue"}

	for _, stream := range []bool{false, true} {
		name := fmt.Sprintf("stream=%t", stream)
		body := fmt.Sprintf(`{"model":"tollgate-mock","stream":%t,"messages":[{"role":"user","content":"hello over expect"}]}`, stream)
		before := c.snapshot(key, tn.MgmtKey)
		res, err := c.send("/chat/completions", key, body, expect)
		if err != nil {
			t.Fatal(err)
		}
		var usage gjson.Result
		if stream {
			evs, err := readStream(res.Body)
			if err != nil {
				t.Fatalf("%s: reading stream: %v", name, err)
			}
			s := parseStream(t, evs)
			if res.StatusCode != 200 || !s.done || s.text != "Mock answer from tollgate-mock: hello over expect" {
				t.Fatalf("%s: status %d, done %t, text %q", name, res.StatusCode, s.done, s.text)
			}
			usage = s.usage
		} else {
			b, _ := io.ReadAll(res.Body)
			if res.StatusCode != 200 {
				t.Fatalf("%s: status %d: %s", name, res.StatusCode, b)
			}
			usage = gjson.GetBytes(b, "usage")
		}
		res.Body.Close()
		if p, cpl := usage.Get("prompt_tokens").Int(), usage.Get("completion_tokens").Int(); p != 3+4 || cpl != 7 {
			t.Fatalf("%s: usage %s", name, usage.Raw)
		}
		cost := creditAmount(t, usage.Get("cost"))
		if want := tokenCost(7, 7); cost != want {
			t.Fatalf("%s: cost %s, want %s", name, cost, want)
		}
		expectCharged(t, before, c.snapshot(key, tn.MgmtKey), cost, name)

		before = c.snapshot(key, tn.MgmtKey)
		bad := fmt.Sprintf(`{"model":"tollgate-mock-error-400","stream":%t,"messages":[{"role":"user","content":"refused"}]}`, stream)
		c.mustPost("/chat/completions", key, bad, expect).expectError(t, 400, "Invalid request")
		expectCharged(t, before, c.snapshot(key, tn.MgmtKey), 0, name+" provider 400")
	}
}

// TestRequestBodiesReachTheProvider: with reverse_proxy's request_buffers
// set in the tollgate block (an operator's choice: a request then leaves in
// one write), a body under the buffer and one over it arrive whole and are
// charged once. A client asking for incremental forwarding (Incremental:
// ?1), which reverse_proxy refuses to buffer, gets its answer too: the
// gateway has read the body whole and does not pass that header on.
func TestRequestBodiesReachTheProvider(t *testing.T) {
	var mu sync.Mutex
	var seen [][]byte
	tap := startTap(t, mockAddr, func(_ string, b []byte) {
		mu.Lock()
		seen = append(seen, b)
		mu.Unlock()
	}, nil)
	startInProcessWith(t, func(cfg string) string {
		cfg = replaceOnce(t, cfg, "\t\t# the gateway's options\n", "\t\trequest_buffers 64KiB\n")
		return strings.ReplaceAll(cfg, "provider mock http://"+mockAddr+"/v1", "provider mock "+tap.URL+"/v1")
	})
	c := newClient(t, gatewayAddr, adminAddr)
	tn := c.newTenant("personal", "10")
	key, _ := c.newKey(tn.MgmtKey, `{"name":"bodies"}`)

	for _, tc := range []struct {
		name string
		text string
		hdr  map[string]string
	}{
		{"small", "a short question", nil},
		{"over the buffer", strings.Repeat("long text ", 10_000), nil},
		{"incremental", "asked to be forwarded as it comes", map[string]string{"Incremental": "?1"}},
	} {
		body := fmt.Sprintf(`{"model":"tollgate-mock","messages":[{"role":"user","content":%q}]}`, tc.text)
		mu.Lock()
		seen = nil
		mu.Unlock()
		before := c.snapshot(key, tn.MgmtKey)
		res, err := c.send("/chat/completions", key, body, tc.hdr)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("%s: status %d: %s", tc.name, res.StatusCode, b)
		}
		mu.Lock()
		got := seen
		mu.Unlock()
		if len(got) != 1 || gjson.GetBytes(got[0], "messages.0.content").String() != tc.text {
			t.Fatalf("%s: the provider got %d requests, the first %d bytes long; want the body whole once", tc.name, len(got), len(firstBody(got)))
		}
		expectCharged(t, before, c.snapshot(key, tn.MgmtKey), creditAmount(t, gjson.GetBytes(b, "usage.cost")), tc.name)
	}
}

func firstBody(bs [][]byte) []byte {
	if len(bs) == 0 {
		return nil
	}
	return bs[0]
}
