package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// messagesCost is the exact cost of a Messages usage at the test prices
// (the prompt is input_tokens and the cached tokens Anthropic counts
// apart), and checks usage.cost against it.
func messagesCost(t *testing.T, what string, u gjson.Result) money.Amount {
	t.Helper()
	prompt := u.Get("input_tokens").Int() + u.Get("cache_read_input_tokens").Int() + u.Get("cache_creation_input_tokens").Int()
	want := tokenCost(prompt, u.Get("output_tokens").Int())
	if got := creditAmount(t, u.Get("cost")); got != want || want == 0 {
		t.Fatalf("%s: usage.cost %s, want %s (%s)", what, got, want, u.Raw)
	}
	return want
}

// expectMessagesError checks an error of the Messages route: the
// gateway's {error:{code,message,metadata}} with Anthropic's members.
func expectMessagesError(t *testing.T, r response, status int, typ, message string) {
	t.Helper()
	r.expectError(t, status, message)
	if r.JSON.Get("type").Str != "error" || r.JSON.Get("error.type").Str != typ || r.JSON.Get("request_id").Type != gjson.Null {
		t.Fatalf("not Anthropic's error shape (want error.type %s): %s", typ, r.Body)
	}
}

// messagesEvents reads a Messages stream: every event named, its name its
// data's type, no [DONE].
func messagesEvents(t *testing.T, evs []sseEvent) ([]gjson.Result, string) {
	t.Helper()
	var docs []gjson.Result
	var names []string
	for _, ev := range evs {
		d := gjson.Parse(ev.Data)
		if ev.Event == "" || d.Get("type").Str != ev.Event {
			t.Fatalf("event %q with data %s", ev.Event, ev.Data)
		}
		docs = append(docs, d)
		names = append(names, ev.Event)
	}
	return docs, strings.Join(names, " ")
}

// streamText joins the text deltas of a Messages stream.
func streamText(docs []gjson.Result) string {
	var b strings.Builder
	for _, d := range docs {
		if d.Get("delta.type").Str == "text_delta" {
			b.WriteString(d.Get("delta.text").Str)
		}
	}
	return b.String()
}

// claudeLike are the fields of a request as Claude Code sends it: system
// blocks and a tool with cache_control, sampling, stop sequences and
// metadata.user_id.
const claudeLike = `"model":"tollgate-mock","max_tokens":100,"temperature":0.2,"top_p":0.9,"top_k":5,
		"stop_sequences":["\n\nHuman:"],"metadata":{"user_id":"user_abc_session_1"},
		"system":[{"type":"text","text":"You are a coding agent."},{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],
		"tools":[{"name":"Read","description":"Read a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]},"cache_control":{"type":"ephemeral"}}],
		"tool_choice":{"type":"auto"},
		"messages":[{"role":"user","content":[{"type":"text","text":"Say hello to the world","cache_control":{"type":"ephemeral"}}]}]`

// TestMessagesRoute serves POST /messages through the strict mock provider
// (which refuses any parameter OpenAI does not define, so the translated
// request must be clean) and a scripted chat provider for tool calls and
// error chunks: plain and streamed answers, charged exactly what their
// usage reports; tool use both ways; fallback; the route's errors.
func TestMessagesRoute(t *testing.T) {
	via := "http://" + mockAddr + "/v1"
	up := scriptedChatUpstream(t)
	startInProcessWith(t, withModels(t,
		apiModel("mx/fallback", [4]string{"broken", via, "tollgate-mock-error-500", "chat"}, [4]string{"backup", via, "tollgate-mock", "chat"}),
		apiModel("mx/broken", [4]string{"broken", via, "tollgate-mock-error-500", "chat"}),
		apiModel("mx/busy", [4]string{"busy", via, "tollgate-mock-error-429", "chat"}),
		apiModel("mx/tool", [4]string{"tooling", up, "tool-up", "chat"}),
		apiModel("mx/err", [4]string{"erring", up, "err-up", "chat"}),
		apiModel("mx/break", [4]string{"chatty", via, "mx-stream-break", "chat"}),
	))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"messages"}`)

	var plainText string
	t.Run("plain", func(t *testing.T) {
		before := c.snapshot(key, org.MgmtKey)
		r := c.mustPost("/messages", key, "{"+claudeLike+"}", nil).expect(t, 200)
		m := r.JSON
		if m.Get("type").Str != "message" || m.Get("role").Str != "assistant" || m.Get("model").Str != "tollgate-mock" ||
			!strings.HasPrefix(m.Get("id").Str, "gen-") || m.Get("id").Str != r.Header.Get("X-Generation-Id") ||
			m.Get("stop_reason").Str != "end_turn" || m.Get("stop_sequence").Type != gjson.Null || m.Get("content.#").Int() != 1 {
			t.Fatalf("message %s", r.Body)
		}
		plainText = m.Get("content.0.text").Str
		if m.Get("content.0.type").Str != "text" || !strings.HasPrefix(plainText, "Mock answer from tollgate-mock") ||
			!strings.HasSuffix(plainText, "Say hello to the world") {
			t.Fatalf("content %s", m.Get("content").Raw)
		}
		u := m.Get("usage")
		if u.Get("input_tokens").Int() == 0 || u.Get("output_tokens").Int() != int64(len(strings.Fields(plainText))) || u.Get("is_byok").Type != gjson.False {
			t.Fatalf("usage %s", u.Raw)
		}
		expectCharged(t, before, c.snapshot(key, org.MgmtKey), messagesCost(t, "plain", u), "plain message")
	})

	t.Run("max_tokens reached", func(t *testing.T) {
		r := c.mustPost("/messages", key, `{"model":"tollgate-mock","max_tokens":3,"messages":[{"role":"user","content":"one two three four"}]}`, nil).expect(t, 200)
		if r.JSON.Get("stop_reason").Str != "max_tokens" || r.JSON.Get("content.0.text").Str != "Mock answer from" || r.JSON.Get("usage.output_tokens").Int() != 3 {
			t.Fatalf("message %s", r.Body)
		}
	})

	t.Run("stream", func(t *testing.T) {
		before := c.snapshot(key, org.MgmtKey)
		res, err := c.send("/messages", key, `{"stream":true,`+claudeLike+`}`, nil)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := readStream(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("stream: %v, status %d, %s", err, res.StatusCode, res.Header.Get("Content-Type"))
		}
		docs, names := messagesEvents(t, evs)
		if !strings.HasPrefix(names, "message_start ping content_block_start content_block_delta") ||
			!strings.HasSuffix(names, "content_block_delta content_block_stop message_delta message_stop") {
			t.Fatalf("events %s", names)
		}
		if id := docs[0].Get("message.id").Str; id != res.Header.Get("X-Generation-Id") || !strings.HasPrefix(id, "gen-") {
			t.Fatalf("message id %q, X-Generation-Id %q", id, res.Header.Get("X-Generation-Id"))
		}
		if got := streamText(docs); got != plainText {
			t.Fatalf("streamed text %q, plain %q", got, plainText)
		}
		md := docs[len(docs)-2]
		if md.Get("delta.stop_reason").Str != "end_turn" {
			t.Fatalf("message_delta %s", md.Raw)
		}
		expectCharged(t, before, c.snapshot(key, org.MgmtKey), messagesCost(t, "stream", md.Get("usage")), "streamed message")
	})

	t.Run("tool use both ways", func(t *testing.T) {
		tools := `"tools":[{"name":"weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}]`
		before := c.snapshot(key, org.MgmtKey)
		r := c.mustPost("/messages", key, `{"model":"mx/tool","max_tokens":50,"messages":[{"role":"user","content":"Wetter in Köln?"}],`+tools+`}`, nil).expect(t, 200)
		call := r.JSON.Get("content.0")
		if r.JSON.Get("stop_reason").Str != "tool_use" || call.Get("type").Str != "tool_use" || call.Get("id").Str != "call_1" ||
			call.Get("name").Str != "weather" || call.Get("input.city").Str != "Köln" || r.JSON.Get("provider").Str != "tooling" {
			t.Fatalf("tool call %s", r.Body)
		}
		cost := messagesCost(t, "tool", r.JSON.Get("usage"))
		if cost != tokenCost(20, 8) {
			t.Fatalf("tool call cost %s", cost)
		}
		expectCharged(t, before, c.snapshot(key, org.MgmtKey), cost, "tool call")

		// The call answered with a tool_result, to the strict provider.
		followUp := `{"model":"tollgate-mock","max_tokens":50,` + tools + `,"messages":[
			{"role":"user","content":"Wetter in Köln?"},
			{"role":"assistant","content":[{"type":"text","text":"Checking."},` + call.Raw + `]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":[{"type":"text","text":"18 degrees"}]},{"type":"text","text":"Thanks"}]}]}`
		r = c.mustPost("/messages", key, followUp, nil).expect(t, 200)
		if !strings.HasSuffix(r.JSON.Get("content.0.text").Str, "Thanks") {
			t.Fatalf("answer to the tool result %s", r.Body)
		}

		docs, names := messagesEvents(t, c.streamOf(t, "/messages", key, `{"model":"mx/tool","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"Wetter?"}],`+tools+`}`))
		if names != "message_start ping content_block_start content_block_delta content_block_delta content_block_stop message_delta message_stop" {
			t.Fatalf("events %s", names)
		}
		var args strings.Builder
		for _, d := range docs {
			args.WriteString(d.Get("delta.partial_json").Str)
		}
		if docs[2].Get("content_block.type").Str != "tool_use" || docs[2].Get("content_block.name").Str != "weather" ||
			args.String() != `{"city":"Köln"}` || docs[6].Get("delta.stop_reason").Str != "tool_use" {
			t.Fatalf("streamed tool call: %s, arguments %q", docs[2].Raw, args.String())
		}
		messagesCost(t, "streamed tool", docs[6].Get("usage"))
	})

	t.Run("fallback", func(t *testing.T) {
		r := c.mustPost("/messages", key, `{"model":"mx/fallback","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`, nil).expect(t, 200)
		if r.JSON.Get("provider").Str != "backup" || r.JSON.Get("model").Str != "mx/fallback" {
			t.Fatalf("fallback answer %s", r.Body)
		}
		// The public API's fallbacks: the next model serves.
		r = c.mustPost("/messages", key, `{"model":"mx/broken","fallbacks":[{"model":"tollgate-mock"}],"max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`, nil).expect(t, 200)
		if r.JSON.Get("model").Str != "tollgate-mock" {
			t.Fatalf("fallbacks answer %s", r.Body)
		}
		r = c.mustPost("/messages", key, `{"model":"mx/broken","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`, nil)
		expectMessagesError(t, r, 500, "api_error", "")
	})

	t.Run("error chunk mid-stream", func(t *testing.T) {
		before := c.snapshot(key, org.MgmtKey)
		docs, names := messagesEvents(t, c.streamOf(t, "/messages", key, `{"model":"mx/err","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"Salut"}]}`))
		last := docs[len(docs)-1]
		if names != "message_start ping content_block_start content_block_delta content_block_delta error" ||
			last.Get("error.type").Str != "api_error" || last.Get("error.message").Str != "upstream model crashed" {
			t.Fatalf("events %s; %s", names, last.Raw)
		}
		// No usage came: the text sent is charged by the abort rule.
		after := c.waitUsage(key, org.MgmtKey, before, 5*time.Second, 50*time.Millisecond)
		if after.usage-before.usage < tokenCost(1, textEstimate(len("Bonjour à tous"))) {
			t.Fatalf("charged %s", after.usage-before.usage)
		}
	})

	t.Run("stream cut by the provider", func(t *testing.T) {
		docs, names := messagesEvents(t, c.streamOf(t, "/messages", key, `{"model":"mx/break","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"a b c d e f g"}]}`))
		last := docs[len(docs)-1]
		if !strings.HasPrefix(names, "message_start ping content_block_start content_block_delta") || !strings.HasSuffix(names, " error") ||
			strings.Contains(names, "message_stop") || last.Get("error.message").Str != "Provider stream ended unexpectedly" {
			t.Fatalf("events %s; %s", names, last.Raw)
		}
	})

	t.Run("errors", func(t *testing.T) {
		r := c.mustPost("/messages", key, `{"model":"tollgate-mock","messages":[{"role":"user","content":"hi"}]}`, nil)
		expectMessagesError(t, r, 400, "invalid_request_error", "max_tokens: required (a positive integer)")
		r = c.mustPost("/messages", key, `{"model":"tollgate-mock","max_tokens":5,"messages":[{"role":"user","content":[{"type":"video"}]}]}`, nil)
		expectMessagesError(t, r, 400, "invalid_request_error", `messages[0].content[0].type: "video" is not supported by this model's provider`)
		r = c.mustPost("/messages", key, `{"model":"nope","max_tokens":5,"messages":[]}`, nil)
		expectMessagesError(t, r, 400, "invalid_request_error", `model: unknown model "nope"`)
		r = c.mustPost("/messages", "", `{"model":"tollgate-mock","max_tokens":5,"messages":[]}`, nil)
		expectMessagesError(t, r, 401, "authentication_error", "")
		r = c.mustPost("/messages", org.MgmtKey, `{"model":"tollgate-mock","max_tokens":5,"messages":[]}`, nil)
		expectMessagesError(t, r, 403, "permission_error", "")
		r = c.mustPost("/messages", key, `{"model":"mx/busy","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, nil)
		expectMessagesError(t, r, 429, "rate_limit_error", "Rate limit exceeded")
		if r.JSON.Get("error.metadata.error_type").Str != "rate_limit_exceeded" || r.Header.Get("Retry-After") != "1" {
			t.Fatalf("429 %s, Retry-After %q", r.Body, r.Header.Get("Retry-After"))
		}
		// The chat route keeps the gateway's own shape.
		r = c.mustPost("/chat/completions", key, `{"model":"tollgate-mock"}`, nil)
		r.expectError(t, 400, "messages")
		if r.JSON.Get("type").Exists() || r.JSON.Get("error.type").Exists() {
			t.Fatalf("chat error %s", r.Body)
		}
	})

	t.Run("402 names max_tokens", func(t *testing.T) {
		capped, _ := c.newKey(org.MgmtKey, `{"name":"capped","limit":0.001}`)
		before := c.snapshot(capped, org.MgmtKey)
		r := c.mustPost("/messages", capped, `{"model":"tollgate-mock","max_tokens":4000,"messages":[{"role":"user","content":"hi"}]}`, nil)
		expectMessagesError(t, r, 402, "billing_error", "This request requires more credits, or fewer max_tokens. You requested up to 4000 tokens, but can only afford")
		if r.JSON.Get("error.metadata.limit_source").Str != "service_key_limit" {
			t.Fatalf("402 metadata %s", r.Body)
		}
		expectCharged(t, before, c.snapshot(capped, org.MgmtKey), 0, "refused message")
	})
}

// TestMessagesUpstreamRequest checks what a chat provider receives for a
// Claude-Code-like streamed request sent with X-Api-Key and Anthropic's
// query and headers: the chat translation only, on /chat/completions
// without the query, with the provider's key and not the client's.
func TestMessagesUpstreamRequest(t *testing.T) {
	tap := newRequestTap(t, mockAddr)
	startInProcessWith(t, withModels(t, apiModel("mx/tapped", [4]string{"tapped", "http://" + tap.addr() + "/v1", "tollgate-mock", "chat"})))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"tapped"}`)
	body := "{" + strings.Replace(claudeLike, `"model":"tollgate-mock"`, `"model":"mx/tapped"`, 1) + `,"stream":true}`
	res, err := c.send("/messages?beta=true", "", body, map[string]string{"X-Api-Key": key, "Anthropic-Version": "2023-06-01", "Anthropic-Beta": "claude-code-20250219"})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := readStream(res.Body)
	res.Body.Close()
	if _, names := messagesEvents(t, evs); err != nil || res.StatusCode != 200 || !strings.HasSuffix(names, "message_stop") {
		t.Fatalf("status %d, %v, events %s", res.StatusCode, err, names)
	}
	got := tap.take(t)
	if got.uri != "/v1/chat/completions" || got.header.Get("X-Api-Key") != "" || got.header.Get("Authorization") != "Bearer mock" ||
		got.header.Get("Anthropic-Version") != "" || got.header.Get("Anthropic-Beta") != "" {
		t.Fatalf("upstream request %s, headers %v", got.uri, got.header)
	}
	want := `{"model":"tollgate-mock","messages":[{"role":"system","content":"You are a coding agent.\n\nBe brief."},
		{"role":"user","content":"Say hello to the world"}],"max_tokens":100,"temperature":0.2,"top_p":0.9,"stop":["\n\nHuman:"],
		"user":"user_abc_session_1","tools":[{"type":"function","function":{"name":"Read","parameters":{"type":"object",
		"properties":{"path":{"type":"string"}},"required":["path"]},"description":"Read a file"}}],"tool_choice":"auto",
		"stream":true,"stream_options":{"include_usage":true}}`
	if !jsonSame(got.body, want) {
		t.Fatalf("upstream body %s\nwant %s", got.body, want)
	}
}

// requestTap stands in front of an upstream and keeps the last POST's
// request URI, headers and body.
type requestTap struct {
	srv  *httptest.Server
	last chan tappedRequest
}

type tappedRequest struct {
	uri    string
	header http.Header
	body   []byte
}

func newRequestTap(t *testing.T, target string) *requestTap {
	t.Helper()
	u, err := url.Parse("http://" + target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	tap := &requestTap{last: make(chan tappedRequest, 16)}
	tap.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		tap.last <- tappedRequest{uri: r.URL.RequestURI(), header: r.Header.Clone(), body: b}
		r.Body = io.NopCloser(strings.NewReader(string(b)))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(tap.srv.Close)
	return tap
}

func (tap *requestTap) addr() string { return strings.TrimPrefix(tap.srv.URL, "http://") }

// take returns the request the tap saw.
func (tap *requestTap) take(t *testing.T) tappedRequest {
	t.Helper()
	select {
	case r := <-tap.last:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no request reached the upstream")
	}
	return tappedRequest{}
}

// jsonSame compares two JSON documents by value.
func jsonSame(got []byte, want string) bool {
	var g, w any
	return json.Unmarshal(got, &g) == nil && json.Unmarshal([]byte(want), &w) == nil && reflect.DeepEqual(g, w)
}

// TestMessagesWebSearch serves web search on the Messages route with the
// gateway's engine: Anthropic's web_search tool (as Claude Code sends it)
// and the gateway's server tool, plain and streamed, the answer's links
// cited as web_search_result_location citations, the search charged and
// reported in the usage.
func TestMessagesWebSearch(t *testing.T) {
	e := startWebSearch(t)
	body := `{"model":"ws/plain","max_tokens":500,"messages":[{"role":"user","content":"Größte Stadt der Schweiz?"}],
		"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5,"blocked_domains":["spam.test"]}]}`
	before := e.c.snapshot(e.key, e.org.MgmtKey)
	r, up, searches := e.post(t, "/messages", body)
	r.expect(t, 200)
	if len(up) != 1 || len(searches) != 1 {
		t.Fatalf("%d upstream calls, %d searches", len(up), len(searches))
	}
	if sys := gjson.GetBytes(up[0], "messages.0"); sys.Get("role").Str != "system" || !strings.HasPrefix(sys.Get("content").Str, "A web search was run on") ||
		gjson.GetBytes(up[0], "tools").Exists() {
		t.Fatalf("upstream body %s", up[0])
	}
	block := r.JSON.Get("content.0")
	cites := block.Get("citations").Array()
	if block.Get("type").Str != "text" || len(cites) == 0 {
		t.Fatalf("answer %s", r.Body)
	}
	for _, c := range cites {
		if c.Get("type").Str != "web_search_result_location" || !strings.HasPrefix(c.Get("url").Str, "http") ||
			!strings.Contains(block.Get("text").Str, "("+c.Get("url").Str+")") || c.Get("cited_text").Str == "" {
			t.Fatalf("citation %s of %q", c.Raw, block.Get("text").Str)
		}
	}
	u := r.JSON.Get("usage")
	results := u.Get("server_tool_use_details.web_search_results").Int()
	if u.Get("server_tool_use.web_search_requests").Int() != 1 || results == 0 {
		t.Fatalf("usage %s", u.Raw)
	}
	cost := creditAmount(t, u.Get("cost"))
	tokens := tokenCost(u.Get("input_tokens").Int()+u.Get("cache_read_input_tokens").Int(), u.Get("output_tokens").Int())
	if cost <= tokens {
		t.Fatalf("cost %s does not price the search over the tokens' %s", cost, tokens)
	}
	expectCharged(t, before, e.c.snapshot(e.key, e.org.MgmtKey), cost, "searched message")

	// Streamed: the same text, the same citations as citations_delta
	// events before their block's stop, the search in message_delta's usage.
	docs, names := messagesEvents(t, e.c.streamOf(t, "/messages", e.key, strings.Replace(body, `"model"`, `"stream":true,"model"`, 1)))
	if !strings.HasSuffix(names, "content_block_stop message_delta message_stop") {
		t.Fatalf("events %s", names)
	}
	var streamed []string
	for _, d := range docs {
		if d.Get("delta.type").Str == "citations_delta" {
			streamed = append(streamed, d.Get("delta.citation").Raw)
		}
	}
	var plain []string
	for _, c := range cites {
		plain = append(plain, c.Raw)
	}
	if streamText(docs) != block.Get("text").Str || !jsonSame([]byte("["+strings.Join(streamed, ",")+"]"), "["+strings.Join(plain, ",")+"]") {
		t.Fatalf("streamed %q %v\nplain %q %v", streamText(docs), streamed, block.Get("text").Str, plain)
	}
	md := docs[len(docs)-2].Get("usage")
	if md.Get("server_tool_use.web_search_requests").Int() != 1 || md.Get("server_tool_use_details.web_search_results").Int() != results ||
		md.Get("cost").Raw != u.Get("cost").Raw {
		t.Fatalf("streamed usage %s, plain %s", md.Raw, u.Raw)
	}

	// The gateway's own server tool; the native engine is not served here.
	r, _, searches = e.post(t, "/messages", `{"model":"ws/plain","max_tokens":300,"messages":[{"role":"user","content":"Caddy"}],"tools":[{"type":"service:web_search","parameters":{"max_results":2}}]}`)
	if r.expect(t, 200); len(searches) != 1 || r.JSON.Get("usage.server_tool_use_details.web_search_results").Int() != 2 {
		t.Fatalf("server tool: %d searches, %s", len(searches), r.Body)
	}
	r, _, _ = e.post(t, "/messages", `{"model":"ws/plain","max_tokens":300,"messages":[{"role":"user","content":"Caddy"}],"tools":[{"type":"service:web_search","parameters":{"engine":"native"}}]}`)
	expectMessagesError(t, r, 400, "invalid_request_error", "engine: native web search is not available on the Messages route")
}
