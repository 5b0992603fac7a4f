package integration

// A provider that answers 200 with no output and no usage gave no answer:
// the client gets the gateway's 502 (a stream: its error event), nothing
// is charged and the hold is released, on every route.

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func TestEmptyAnswersAreProviderErrors(t *testing.T) {
	models := []string{"mock-empty", "mock-empty-object"}
	startInProcessWith(t, withMockModels(t, models...))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "100")
	key, hash := c.newKey(org.MgmtKey, `{"name":"empty","limit":1}`)

	for _, model := range models {
		for _, route := range []string{"chat", "responses", "messages"} {
			for _, stream := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/stream=%v", model, route, stream)
				t.Run(name, func(t *testing.T) {
					path, body := outputBody(route, "text", model)
					if !stream {
						body = strings.Replace(body, `"stream":true`, `"stream":false`, 1)
					}
					before := c.snapshot(key, org.MgmtKey)
					res, err := c.send(path, key, body, nil)
					if err != nil {
						t.Fatal(err)
					}
					ct := res.Header.Get("Content-Type")
					if !stream || model == "mock-empty-object" {
						// A JSON answer (also the {} a stream request got):
						// the gateway's 502, in the route's error shape.
						b, err := io.ReadAll(res.Body)
						res.Body.Close()
						if err != nil {
							t.Fatal(err)
						}
						r := response{Status: res.StatusCode, Body: b, JSON: gjson.ParseBytes(b)}
						if r.Status != 502 || !strings.HasPrefix(ct, "application/json") {
							t.Fatalf("status %d %s: %s", r.Status, ct, r.Body)
						}
						e := r.JSON.Get("error")
						if e.Get("code").Int() != 502 || e.Get("message").Str != "Provider returned an empty answer" ||
							e.Get("metadata.provider_name").Str != "mock" {
							t.Fatalf("error body: %s", r.Body)
						}
						if route == "messages" && (r.JSON.Get("type").Str != "error" || e.Get("type").Str == "") {
							t.Fatalf("not Anthropic's error shape: %s", r.Body)
						}
					} else {
						evs, err := readStream(res.Body)
						res.Body.Close()
						if err != nil || res.StatusCode != 200 {
							t.Fatalf("status %d, %v", res.StatusCode, err)
						}
						var errEv gjson.Result
						for _, ev := range evs {
							if d := gjson.Parse(ev.Data); d.Get("error").Exists() || d.Get("type").Str == "response.failed" {
								errEv = d
							}
							if deltaText(ev) != "" {
								t.Fatalf("output in an empty stream: %s", ev.Data)
							}
						}
						switch route {
						case "chat":
							if errEv.Get("error.code").Int() != 502 || errEv.Get("choices.0.finish_reason").Str != "error" {
								t.Fatalf("no 502 error chunk: %v", evs)
							}
						case "responses":
							if errEv.Get("type").Str != "response.failed" {
								t.Fatalf("no response.failed: %v", evs)
							}
						case "messages":
							if errEv.Get("type").Str != "error" || errEv.Get("error.type").Str == "" {
								t.Fatalf("no error event: %v", evs)
							}
						}
					}
					expectCharged(t, before, c.snapshot(key, org.MgmtKey), 0, name)
				})
			}
		}
	}
	expectNoHolds(t, c, org.MgmtKey, key, hash)
}
