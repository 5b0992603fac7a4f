package integration

// A provider that hangs: it never answers, or opens a stream and sends
// nothing. The attempt fails as timed out within the provider's timeouts,
// the client gets a 408 in the standard error body (or the next provider's
// answer), nothing is charged and the hold is released at once.

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// hangingUpstream is a provider that, for a model containing "silent",
// reads the request and answers nothing; for any other, answers 200 with
// an event stream's headers and then nothing. It hangs until the gateway
// gives up (or the test ends).
func hangingUpstream(t *testing.T) string {
	t.Helper()
	done := make(chan struct{})
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
		if !strings.Contains(gjson.Get(body.String(), "model").Str, "silent") {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			_ = http.NewResponseController(w).Flush()
		}
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestHungProviderTimesOut(t *testing.T) {
	hung := "http://" + hangingUpstream(t) + "/v1"
	// The provider's own timeouts, far below the gateway's defaults.
	withTimeouts := func(block, upstream string) string {
		return strings.Replace(block, "\t\t\t\tmodel "+upstream+"\n",
			"\t\t\t\tmodel "+upstream+"\n\t\t\t\tresponse_header_timeout 400ms\n\t\t\t\tfirst_byte_timeout 300ms\n\t\t\t\tdial_timeout 2s\n", 1)
	}
	hungModel := func(id, upstream string, more ...testProvider) string {
		ps := append([]testProvider{{name: "hung", baseURL: hung, model: upstream, apiKey: "sk-hung-provider-key"}}, more...)
		return withTimeouts(modelBlock(id, "0.000001", "0.000002", ps...), upstream)
	}
	startInProcessWith(t, withModels(t,
		hungModel("hung/silent", "hang-silent"),
		hungModel("hung/stream", "hang-stream"),
		hungModel("hung/fallback", "hang-silent", testProvider{name: "mock", baseURL: "http://" + mockAddr + "/v1", model: "tollgate-mock", apiKey: "mock"}),
	))
	c := newClient(t, gatewayAddr, adminAddr)
	c.http.Timeout = 20 * time.Second // far above the provider's timeouts: a hang fails the test
	org := c.newTenant("organization", "10")

	for _, tc := range []struct {
		model  string
		stream bool
	}{{"hung/silent", false}, {"hung/silent", true}, {"hung/stream", true}} {
		for _, route := range []string{"chat", "responses", "messages"} {
			name := fmt.Sprintf("%s/%s/stream=%v", tc.model, route, tc.stream)
			t.Run(name, func(t *testing.T) {
				path, body := routeBody(route, tc.model, "are you there?", tc.stream)
				mockPath, mockBody := routeBody(route, "tollgate-mock", "are you there?", false)
				// The key's limit is one request's hold: a hold still held
				// refuses the next request.
				key, _ := c.newKey(org.MgmtKey, fmt.Sprintf(`{"name":%q,"limit":%s}`, name, max(holdOf(body, 100), holdOf(mockBody, 100))))
				before := c.snapshot(key, org.MgmtKey)
				began := time.Now()
				res, err := c.post(path, key, body, nil)
				if err != nil {
					t.Fatalf("no answer from the gateway: %v", err)
				}
				if took := time.Since(began); took > 5*time.Second {
					t.Errorf("answered after %s", took)
				}
				if res.Status != http.StatusRequestTimeout {
					t.Fatalf("status %d, want 408: %s", res.Status, res.Body)
				}
				if route == "messages" {
					if res.JSON.Get("type").Str != "error" || res.JSON.Get("error.type").Str != "timeout_error" {
						t.Fatalf("Messages error body %s", res.Body)
					}
				} else if res.JSON.Get("error.code").Int() != 408 || res.JSON.Get("error.message").Str != "Provider timed out" ||
					res.JSON.Get("error.metadata.provider_name").Str != "hung" {
					t.Fatalf("error body %s", res.Body)
				}
				expectCharged(t, before, c.snapshot(key, org.MgmtKey), 0, name)
				// The hold was released: the same request to a provider that
				// answers fits the key's limit again.
				c.mustPost(mockPath, key, mockBody, nil).expect(t, 200)
			})
		}
	}

	t.Run("fallback", func(t *testing.T) {
		key, _ := c.newKey(org.MgmtKey, `{"name":"hung fallback"}`)
		path, body := routeBody("chat", "hung/fallback", "are you there?", false)
		r := c.mustPost(path, key, body, nil).expect(t, 200)
		if r.JSON.Get("provider").Str != "mock" || r.JSON.Get("choices.0.message.content").Str == "" {
			t.Fatalf("answer %s", r.Body)
		}
	})
}

// The gateway-wide timeouts, for providers that set none: the proxies'
// response_header_timeout and the tollgate block's first_byte_timeout.
func TestHungProviderGatewayTimeouts(t *testing.T) {
	hung := "http://" + hangingUpstream(t) + "/v1"
	p := func(upstream string) testProvider {
		return testProvider{name: "hung", baseURL: hung, model: upstream, apiKey: "sk-hung-provider-key"}
	}
	startInProcessWith(t, chain(
		withModels(t, modelBlock("hung/silent", "0.000001", "0.000002", p("hang-silent")),
			modelBlock("hung/stream", "0.000001", "0.000002", p("hang-stream"))),
		withTollgateOptions(t, "first_byte_timeout 300ms"),
		withResponseHeaderTimeout(t, "2s")))
	c := newClient(t, gatewayAddr, adminAddr)
	c.http.Timeout = 20 * time.Second
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"hung defaults"}`)
	for _, tc := range []struct {
		model  string
		stream bool
		within time.Duration
	}{{"hung/silent", false, 2 * time.Second}, {"hung/silent", true, 300 * time.Millisecond}, {"hung/stream", true, 300 * time.Millisecond}} {
		path, body := routeBody("chat", tc.model, "are you there?", tc.stream)
		before := c.snapshot(key, org.MgmtKey)
		began := time.Now()
		res, err := c.post(path, key, body, nil)
		took := time.Since(began)
		if err != nil {
			t.Fatalf("%s stream=%v: no answer from the gateway: %v", tc.model, tc.stream, err)
		}
		if res.Status != http.StatusRequestTimeout || res.JSON.Get("error.message").Str != "Provider timed out" {
			t.Fatalf("%s stream=%v: status %d: %s", tc.model, tc.stream, res.Status, res.Body)
		}
		// A stream's wait is the first-byte timeout, not the header one.
		if took < tc.within || took > tc.within+1500*time.Millisecond {
			t.Errorf("%s stream=%v: answered after %s, want about %s", tc.model, tc.stream, took, tc.within)
		}
		expectCharged(t, before, c.snapshot(key, org.MgmtKey), 0, tc.model)
	}
}
