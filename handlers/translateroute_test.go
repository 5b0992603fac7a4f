package handlers

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/handlers/answer"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/sse"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

func TestRouteTranslatesPerAttempt(t *testing.T) {
	chatOnly := testgw.Provider("chatty", "http", "chat.test", "chat.test:80", "/v1", "c-model", "k1")
	chatOnly.API = "chat"
	native := testgw.Provider("native", "https", "resp.test", "resp.test:443", "/api", "r-model", "k2")
	m := testgw.Model("m", 0, chatOnly, native)
	newRoute := func(body string, attempts ...upstream.Attempt) *upstream.Route {
		return &upstream.Route{Kind: "responses", Attempts: attempts, Body: []byte(body), URI: "/responses?x=1"}
	}
	a1, a2 := upstream.Attempt{Model: m, Provider: chatOnly, Key: "k1"}, upstream.Attempt{Model: m, Provider: native, Key: "k2"}

	rt := newRoute(`{"model":"m","input":"Hi","max_output_tokens":5}`, a1, a2)
	if err := rt.TranslateFor(); err != nil {
		t.Fatal(err)
	}
	r, _ := http.NewRequest(http.MethodPost, "/api/v1/responses?x=1", nil)
	for i, want := range []struct{ uri, body string }{
		{"/v1/chat/completions?x=1", `{"model":"c-model","messages":[{"role":"user","content":"Hi"}],"max_tokens":5}`},
		{"/api/responses?x=1", `{"model":"r-model","input":"Hi","max_output_tokens":5}`},
	} {
		if err := rt.Apply(r, i); err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(r.Body)
		uri, _ := rt.Placeholder("tollgate.upstream.uri")
		if uri != want.uri || rt.Translate != (i == 0) || r.ContentLength != int64(len(body)) {
			t.Errorf("attempt %d: uri %v translate %v length %d", i, uri, rt.Translate, r.ContentLength)
		}
		testgw.JSONEqual(t, body, want.body)
	}

	// No chat form: only providers that speak Responses serve it.
	rt = newRoute(`{"model":"m","input":"Hi","previous_response_id":"resp_1"}`, a1, a2)
	if err := rt.TranslateFor(); err != nil || len(rt.Attempts) != 1 || rt.Attempts[0].Provider != native {
		t.Errorf("mixed providers: %v %v", err, rt.Attempts)
	}
	rt = newRoute(`{"model":"m","input":"Hi","previous_response_id":"resp_1"}`, a1)
	if err := rt.TranslateFor(); err == nil || err.Status != http.StatusBadRequest || !strings.HasPrefix(err.Message, "previous_response_id:") {
		t.Errorf("chat-only providers: %v", err)
	}
	// Chat completions requests are never translated.
	rt = newRoute(`{"model":"m","messages":[]}`, a1)
	rt.Kind = "chat"
	if err := rt.TranslateFor(); err != nil || rt.ChatBody != nil {
		t.Errorf("chat request: %v %s", err, rt.ChatBody)
	}
}

// The gateway's own response.failed is numbered after the events sent (0
// when none was) and carries the full Responses object.
func TestMeterResponsesStreamErrorEvent(t *testing.T) {
	route := &upstream.Route{Model: testgw.Model("m", 0), Provider: testgw.Provider("p", "http", "h", "h:80", "", "m", "k"), Kind: "responses",
		Body: []byte(`{"model":"m","input":"x","instructions":"Be brief.","max_output_tokens":9}`)}
	for _, tt := range []struct {
		before string
		seq    int64
	}{
		{"", 0},
		{"event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0}\n\n" +
			"event: response.in_progress\ndata: {\"type\":\"response.in_progress\",\"sequence_number\":1}\n\n", 2},
	} {
		rec := httptest.NewRecorder()
		mw := answer.NewWriter(rec, "responses")
		mw.GenID = "gen-x"
		mw.Header().Set("Content-Type", "text/event-stream")
		mw.WriteHeader(http.StatusOK)
		if _, err := mw.Write([]byte(tt.before)); err != nil {
			t.Fatal(err)
		}
		if err := mw.SendStreamError(route, http.StatusBadGateway, "broke"); err != nil {
			t.Fatal(err)
		}
		events := streamData(rec.Body.String())
		failed := gjson.Parse(events[len(events)-2])
		r := failed.Get("response")
		if failed.Get("type").Str != "response.failed" || failed.Get("sequence_number").Int() != tt.seq ||
			r.Get("id").Str != "gen-x" || r.Get("status").Str != "failed" || r.Get("error.message").Str != "broke" ||
			r.Get("instructions").Str != "Be brief." || r.Get("max_output_tokens").Int() != 9 || r.Get("tools").Raw != "[]" ||
			!r.Get("parallel_tool_calls").Exists() || events[len(events)-1] != "[DONE]" {
			t.Errorf("after %q: %s", tt.before, rec.Body.String())
		}
	}
}

// streamData returns the data of each complete event of a stream.
func streamData(body string) []string {
	var out []string
	b := []byte(body)
	for {
		ev, rest, ok := sse.CutEvent(b)
		if !ok {
			return out
		}
		out = append(out, string(sse.Data(ev)))
		b = rest
	}
}
