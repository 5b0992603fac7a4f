package integration

// The Responses route served by providers that speak only Chat Completions
// (provider option `api chat`): the request and the answer are translated
// per attempt, streamed answers event by event, and metering sees the
// Responses answer exactly as from a provider that speaks Responses.

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// pathRecorder stands in front of the mock provider and records the path
// and body of every POST reaching it.
type pathRecorder struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls []upstreamCall
}

type upstreamCall struct {
	path string
	body []byte
}

func newPathRecorder(t *testing.T, target string) *pathRecorder {
	t.Helper()
	p := &pathRecorder{}
	p.srv = startTap(t, target, func(path string, body []byte) {
		p.mu.Lock()
		p.calls = append(p.calls, upstreamCall{path: path, body: body})
		p.mu.Unlock()
	}, nil)
	return p
}

// takeCalls returns the calls recorded since the last take.
func (p *pathRecorder) takeCalls() []upstreamCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.calls
	p.calls = nil
	return c
}

// take returns the calls recorded since the last take, as "path model".
func (p *pathRecorder) take() []string {
	var out []string
	for _, c := range p.takeCalls() {
		out = append(out, c.path+" "+gjson.GetBytes(c.body, "model").Str)
	}
	return out
}

func (p *pathRecorder) addr() string { return strings.TrimPrefix(p.srv.URL, "http://") }

// apiModel is a catalog model whose providers each name their API.
func apiModel(id string, providers ...[4]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\t\tmodel %s {\n\t\t\tcontext_length 8192\n\t\t\tpricing {\n\t\t\t\tprompt 0.000001\n\t\t\t\tcompletion 0.000002\n\t\t\t}\n", id)
	for _, p := range providers { // name, base URL, upstream model, api
		fmt.Fprintf(&b, "\t\t\tprovider %s %s {\n\t\t\t\tmodel %s\n\t\t\t\tapi_key mock\n\t\t\t\tapi %s\n\t\t\t}\n", p[0], p[1], p[2], p[3])
	}
	b.WriteString("\t\t}\n")
	return b.String()
}

// responsesInput is a conversation with an earlier assistant answer that
// carries its id, status and annotations.
const responsesInput = `"instructions":"Answer briefly.","input":[
	{"type":"message","role":"developer","content":[{"type":"input_text","text":"Cite sources."}]},
	{"type":"message","role":"user","content":[{"type":"input_text","text":"Où est le café?"}]},
	{"type":"message","id":"msg_prev","status":"completed","role":"assistant","content":[{"type":"output_text",
		"text":"See [Café](https://example.com/caf%C3%A9).","annotations":[{"type":"url_citation","url":"https://example.com/caf%C3%A9","title":"Café","start_index":4,"end_index":40}]}]},
	{"type":"message","role":"user","content":[{"type":"input_text","text":"Und die Quellen, bitte?"}]}]`

// checkCitations checks the answer's annotations: the mock's two sources,
// each pointing (in code points) exactly at its markdown link.
func checkCitations(t *testing.T, what string, part gjson.Result) {
	t.Helper()
	text := []rune(part.Get("text").Str)
	anns := part.Get("annotations").Array()
	if len(anns) != 2 {
		t.Fatalf("%s: %d annotations: %s", what, len(anns), part.Raw)
	}
	for _, a := range anns {
		s, e := a.Get("start_index").Int(), a.Get("end_index").Int()
		if a.Get("type").Str != "url_citation" || s < 0 || e > int64(len(text)) || s >= e {
			t.Fatalf("%s: annotation %s over %d characters", what, a.Raw, len(text))
		}
		want := "[" + a.Get("title").Str + "](" + a.Get("url").Str + ")"
		if got := string(text[s:e]); got != want {
			t.Fatalf("%s: annotation spans %q, want %q", what, got, want)
		}
	}
}

// checkResponseObject checks the Responses object fields the public API
// and the SDKs require, and returns its output_text part.
func checkResponseObject(t *testing.T, what string, r gjson.Result, status string) gjson.Result {
	t.Helper()
	for _, f := range []string{"id", "created_at", "model", "output", "usage", "status", "tools", "tool_choice",
		"parallel_tool_calls", "metadata", "error", "incomplete_details", "instructions", "max_output_tokens", "temperature", "top_p"} {
		if !r.Get(f).Exists() {
			t.Fatalf("%s: no %s: %s", what, f, r.Raw)
		}
	}
	u := r.Get("usage")
	if r.Get("object").Str != "response" || r.Get("status").Str != status ||
		u.Get("total_tokens").Int() != u.Get("input_tokens").Int()+u.Get("output_tokens").Int() || u.Get("output_tokens").Int() == 0 ||
		!u.Get("input_tokens_details.cached_tokens").Exists() || !u.Get("output_tokens_details.reasoning_tokens").Exists() {
		t.Fatalf("%s: response object: %s", what, r.Raw)
	}
	item := r.Get("output.0")
	if item.Get("type").Str != "message" || item.Get("role").Str != "assistant" || item.Get("id").Str == "" ||
		item.Get("status").Str != status || item.Get("content.0.type").Str != "output_text" {
		t.Fatalf("%s: output item: %s", what, item.Raw)
	}
	return item.Get("content.0")
}

// costOf is the exact cost of a Responses usage at the test prices, and
// checks usage.cost against it.
func costOf(t *testing.T, what string, u gjson.Result) money.Amount {
	t.Helper()
	want := tokenCost(u.Get("input_tokens").Int(), u.Get("output_tokens").Int())
	if got := creditAmount(t, u.Get("cost")); got != want || want == 0 {
		t.Fatalf("%s: usage.cost %s, want %s", what, got, want)
	}
	return want
}

// streamedResponse reads a Responses stream: its events in order (without
// [DONE]) with their arrival times, after checking sequence numbers and
// the final [DONE].
type timedEvent struct {
	ev  sseEvent
	at  time.Time
	doc gjson.Result
}

func readResponsesEvents(t *testing.T, c *client, key, body string) []timedEvent {
	t.Helper()
	res := openResponsesStream(t, c, key, body)
	defer res.Body.Close()
	r := newEventReader(res.Body)
	var out []timedEvent
	seq := responsesSequence{t: t}
	for {
		ev, err := r()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading stream: %v", err)
		}
		if doc, ok := seq.next(ev); ok {
			out = append(out, timedEvent{ev: ev, at: time.Now(), doc: doc})
		}
	}
	seq.end()
	return out
}

// openResponsesStream sends a streaming Responses request and checks that
// it is answered 200 with an event stream; the caller closes the body.
func openResponsesStream(t *testing.T, c *client, key, body string) *http.Response {
	t.Helper()
	res, err := c.send("/responses", key, body, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		t.Fatalf("stream: %d %s", res.StatusCode, b)
	}
	return res
}

// responsesSequence checks a Responses stream event by event.
type responsesSequence struct {
	t    *testing.T
	n    int
	done bool
}

// next checks ev: nothing comes after data: [DONE], sequence_number counts
// up from 0, and an SSE event name is the event's type. It returns the
// parsed event, and false for [DONE].
func (s *responsesSequence) next(ev sseEvent) (gjson.Result, bool) {
	s.t.Helper()
	if s.done {
		s.t.Fatalf("event after [DONE]: %s", ev.Data)
	}
	if ev.Data == "[DONE]" {
		s.done = true
		return gjson.Result{}, false
	}
	d := gjson.Parse(ev.Data)
	if seq := d.Get("sequence_number"); seq.Type != gjson.Number || seq.Int() != int64(s.n) {
		s.t.Fatalf("event %d (%s) has sequence_number %s", s.n, d.Get("type").Str, seq.Raw)
	}
	if ev.Event != "" && ev.Event != d.Get("type").Str {
		s.t.Fatalf("event: %s carries type %s", ev.Event, d.Get("type").Str)
	}
	s.n++
	return d, true
}

// end checks that the stream ended with data: [DONE].
func (s *responsesSequence) end() {
	s.t.Helper()
	if !s.done {
		s.t.Fatal("stream did not end with data: [DONE]")
	}
}

func newEventReader(body io.Reader) func() (sseEvent, error) {
	r := bufio.NewReader(body)
	return func() (sseEvent, error) { return readEvent(r) }
}

// eventTypes lists the types, collapsing repeats of one type in a row.
func eventTypes(evs []timedEvent) string {
	var types []string
	for _, e := range evs {
		typ := e.doc.Get("type").Str
		if len(types) == 0 || types[len(types)-1] != typ {
			types = append(types, typ)
		}
	}
	return strings.Join(types, " ")
}

const fullEventList = "response.created response.in_progress response.output_item.added response.content_part.added " +
	"response.output_text.delta response.output_text.annotation.added response.output_text.done response.content_part.done " +
	"response.output_item.done response.completed"

func TestResponsesTranslated(t *testing.T) {
	rec := newPathRecorder(t, mockAddr)
	via := "http://" + rec.addr() + "/v1"
	// The fallback's calls alone: no retry of the 429 on its endpoint.
	startInProcessWith(t, chain(withChunkDelay(t, "40ms"), withTollgateOptions(t, "retries 0"), withModels(t,
		apiModel("rt/chat", [4]string{"chatty", via, "tollgate-mock-cite", "chat"}),
		apiModel("rt/native", [4]string{"native", via, "tollgate-mock-cite", "responses"}),
		apiModel("rt/fallback",
			[4]string{"down", via, "x-error-500", "chat"},
			[4]string{"limited", via, "y-error-429", "chat"},
			[4]string{"chatty", via, "tollgate-mock-cite", "chat"}),
		apiModel("rt/tonative",
			[4]string{"down", via, "x-error-502", "chat"},
			[4]string{"native", via, "tollgate-mock-cite", "responses"}),
		apiModel("rt/break", [4]string{"chatty", via, "rt-stream-break", "chat"}),
	)))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"responses","limit":5}`)

	plain := func(model string) string { return `{"model":"` + model + `",` + responsesInput + `}` }
	streamed := func(model string) string { return `{"model":"` + model + `","stream":true,` + responsesInput + `}` }

	var nativePlain gjson.Result
	t.Run("plain", func(t *testing.T) {
		rec.take()
		before := c.snapshot(key, org.MgmtKey)
		r := c.mustPost("/responses", key, plain("rt/native"), nil).expect(t, 200)
		nativePlain = r.JSON
		if got := rec.take(); strings.Join(got, ",") != "/v1/responses tollgate-mock-cite" {
			t.Fatalf("native upstream calls %v", got)
		}
		mid := c.snapshot(key, org.MgmtKey)
		expectCharged(t, before, mid, costOf(t, "native", r.JSON.Get("usage")), "native")
		checkCitations(t, "native", checkResponseObject(t, "native", r.JSON, "completed"))

		r = c.mustPost("/responses", key, plain("rt/chat"), nil).expect(t, 200)
		calls := rec.takeCalls()
		if len(calls) != 1 || calls[0].path != "/v1/chat/completions" {
			t.Fatalf("translated upstream calls %v", calls)
		}
		up := gjson.ParseBytes(calls[0].body)
		if !up.Get("messages").IsArray() || up.Get("input").Exists() || up.Get("instructions").Exists() ||
			up.Get("messages.0.content").Str != "Answer briefly." || up.Get("messages.3.role").Str != "assistant" ||
			up.Get("messages.3.content").Str != "See [Café](https://example.com/caf%C3%A9)." {
			t.Fatalf("chat request upstream: %s", calls[0].body)
		}
		part := checkResponseObject(t, "translated", r.JSON, "completed")
		checkCitations(t, "translated", part)
		if g := r.Header.Get("X-Generation-Id"); g == "" || r.JSON.Get("id").Str != g {
			t.Fatalf("response id %q, generation %q", r.JSON.Get("id").Str, g)
		}
		// The same conversation gives the same answer and tokens either way.
		for _, path := range []string{"output.0.content.0.text", "output.0.content.0.annotations", "usage.input_tokens", "usage.output_tokens", "instructions"} {
			if g, n := r.JSON.Get(path).Raw, nativePlain.Get(path).Raw; g != n {
				t.Fatalf("%s: translated %s, native %s", path, g, n)
			}
		}
		expectCharged(t, mid, c.snapshot(key, org.MgmtKey), costOf(t, "translated", r.JSON.Get("usage")), "translated")
	})

	t.Run("streamed", func(t *testing.T) {
		for _, model := range []string{"rt/chat", "rt/native"} {
			rec.take()
			before := c.snapshot(key, org.MgmtKey)
			evs := readResponsesEvents(t, c, key, streamed(model))
			wantPath := map[string]string{"rt/chat": "/v1/chat/completions", "rt/native": "/v1/responses"}[model]
			if got := rec.take(); strings.Join(got, ",") != wantPath+" tollgate-mock-cite" {
				t.Fatalf("%s: upstream calls %v", model, got)
			}
			if got := eventTypes(evs); got != fullEventList {
				t.Fatalf("%s: events\n%s\nwant\n%s", model, got, fullEventList)
			}
			var text strings.Builder
			var firstDelta time.Time
			var deltas int
			var added []string
			for _, e := range evs {
				switch e.doc.Get("type").Str {
				case "response.output_item.added":
					if e.doc.Get("item.type").Str != "message" {
						t.Fatalf("%s: item %s", model, e.ev.Data)
					}
				case "response.output_text.delta":
					if deltas == 0 {
						firstDelta = e.at
					}
					deltas++
					text.WriteString(e.doc.Get("delta").Str)
				case "response.output_text.annotation.added":
					added = append(added, e.doc.Get("annotation").Raw)
				}
			}
			final := evs[len(evs)-1].doc.Get("response")
			part := checkResponseObject(t, model, final, "completed")
			checkCitations(t, model, part)
			if text.String() != part.Get("text").Str || "["+strings.Join(added, ",")+"]" != part.Get("annotations").Raw {
				t.Fatalf("%s: deltas %q and annotation events %v differ from the final %s", model, text.String(), added, part.Raw)
			}
			// Not buffered: the mock waits 40ms between chunks, and the
			// first delta reached the client long before the end.
			if gap := evs[len(evs)-1].at.Sub(firstDelta); gap < time.Duration(deltas-1)*40*time.Millisecond/2 {
				t.Fatalf("%s: first delta only %v before the end (%d deltas): buffered?", model, gap, deltas)
			}
			// Streamed and plain give the same final answer.
			for _, path := range []string{"output.0.content.0.text", "output.0.content.0.annotations", "usage.input_tokens", "usage.output_tokens"} {
				if g, n := final.Get(path).Raw, nativePlain.Get(path).Raw; g != n {
					t.Fatalf("%s: %s streamed %s, plain %s", model, path, g, n)
				}
			}
			expectCharged(t, before, c.snapshot(key, org.MgmtKey), costOf(t, model, final.Get("usage")), model+" streamed")
		}
	})

	t.Run("fallback", func(t *testing.T) {
		for _, tc := range []struct {
			model string
			want  []string
		}{
			{"rt/fallback", []string{"/v1/chat/completions x-error-500", "/v1/chat/completions y-error-429", "/v1/chat/completions tollgate-mock-cite"}},
			{"rt/tonative", []string{"/v1/chat/completions x-error-502", "/v1/responses tollgate-mock-cite"}},
		} {
			rec.take()
			before := c.snapshot(key, org.MgmtKey)
			r := c.mustPost("/responses", key, plain(tc.model), nil).expect(t, 200)
			if got := rec.take(); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("%s: upstream calls %v, want %v", tc.model, got, tc.want)
			}
			checkCitations(t, tc.model, checkResponseObject(t, tc.model, r.JSON, "completed"))
			expectCharged(t, before, c.snapshot(key, org.MgmtKey), costOf(t, tc.model, r.JSON.Get("usage")), tc.model)

			before = c.snapshot(key, org.MgmtKey)
			evs := readResponsesEvents(t, c, key, streamed(tc.model))
			if got := rec.take(); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("%s streamed: upstream calls %v, want %v", tc.model, got, tc.want)
			}
			if got := eventTypes(evs); got != fullEventList {
				t.Fatalf("%s streamed: events %s", tc.model, got)
			}
			final := evs[len(evs)-1].doc.Get("response")
			expectCharged(t, before, c.snapshot(key, org.MgmtKey), costOf(t, tc.model, final.Get("usage")), tc.model+" streamed")
		}
	})

	t.Run("stream broken mid-answer", func(t *testing.T) {
		before := c.snapshot(key, org.MgmtKey)
		rec.take()
		evs := readResponsesEvents(t, c, key, `{"model":"rt/break","stream":true,"input":"tell me more"}`)
		calls := rec.takeCalls()
		if len(calls) != 1 || calls[0].path != "/v1/chat/completions" {
			t.Fatalf("upstream calls %v", calls)
		}
		var text strings.Builder
		for _, e := range evs {
			text.WriteString(e.doc.Get("delta").Str)
		}
		last := evs[len(evs)-1].doc
		if last.Get("type").Str != "response.failed" || last.Get("response.status").Str != "failed" || text.Len() == 0 {
			t.Fatalf("broken stream ends with %s", last.Raw)
		}
		// Charged by the abort rule: the prompt estimate (of the body the
		// provider received) and the text sent.
		want := tokenCost(promptEstimate(string(calls[0].body)), textEstimate(text.Len()))
		expectCharged(t, before, c.waitUsage(key, org.MgmtKey, before, 5*time.Second, 50*time.Millisecond), want, "broken stream")
	})

	// Concurrent translated requests: every answer's usage.cost is charged
	// once, nothing else; a key cap that fits two holds is never exceeded.
	t.Run("concurrent", func(t *testing.T) {
		type result struct {
			status int
			cost   money.Amount
			err    error
		}
		run := func(key string, bodies []string) []result {
			out := make([]result, len(bodies))
			var wg sync.WaitGroup
			for i, body := range bodies {
				wg.Go(func() {
					res, err := c.send("/responses", key, body, nil)
					if err != nil {
						out[i].err = err
						return
					}
					defer res.Body.Close()
					out[i].status = res.StatusCode
					var usage gjson.Result
					if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
						evs, err := readStream(res.Body)
						if err != nil || len(evs) < 2 || evs[len(evs)-1].Data != "[DONE]" {
							out[i].err = fmt.Errorf("stream: %v, %d events", err, len(evs))
							return
						}
						last := gjson.Parse(evs[len(evs)-2].Data)
						if last.Get("type").Str != "response.completed" {
							out[i].err = fmt.Errorf("stream ends with %s", last.Raw)
							return
						}
						usage = last.Get("response.usage")
					} else {
						b, _ := io.ReadAll(res.Body)
						usage = gjson.GetBytes(b, "usage")
					}
					if res.StatusCode == 200 {
						a, err := money.ParseAmount(usage.Get("cost").Raw)
						if err != nil || a != tokenCost(usage.Get("input_tokens").Int(), usage.Get("output_tokens").Int()) {
							out[i].err = fmt.Errorf("usage %s: %v", usage.Raw, err)
						}
						out[i].cost = a
					}
				})
			}
			wg.Wait()
			return out
		}

		var bodies []string
		for i := range 16 {
			switch i % 4 {
			case 0:
				bodies = append(bodies, plain("rt/chat"))
			case 1:
				bodies = append(bodies, streamed("rt/chat"))
			case 2:
				bodies = append(bodies, plain("rt/fallback"))
			default:
				bodies = append(bodies, streamed("rt/tonative"))
			}
		}
		before := c.snapshot(key, org.MgmtKey)
		var sum money.Amount
		for i, r := range run(key, bodies) {
			if r.err != nil || r.status != 200 {
				t.Fatalf("request %d: %d %v", i, r.status, r.err)
			}
			sum += r.cost
		}
		expectCharged(t, before, c.snapshot(key, org.MgmtKey), sum, "concurrent translated requests")

		// Holds of max_output_tokens 1000 (2,000,000 nano-credits plus the
		// prompt) against a cap of 0.005: at most two streams (of about 45
		// chunks, 40ms apart) at once; the others are refused with 402.
		capped, _ := c.newKey(org.MgmtKey, `{"name":"capped","limit":0.005}`)
		capBefore := c.snapshot(capped, org.MgmtKey)
		body := `{"model":"rt/chat","stream":true,"max_output_tokens":1000,"input":"` + longPrompt(40) + `"}`
		results := run(capped, slices.Repeat([]string{body}, 8))
		sum = 0
		ok, refused := 0, 0
		for i, r := range results {
			switch {
			case r.err != nil:
				t.Fatalf("capped request %d: %v", i, r.err)
			case r.status == 200:
				ok++
				sum += r.cost
			case r.status == 402:
				refused++
			default:
				t.Fatalf("capped request %d: status %d", i, r.status)
			}
		}
		after := c.snapshot(capped, org.MgmtKey)
		expectCharged(t, capBefore, after, sum, "capped translated requests")
		t.Logf("capped: %d served, %d refused, usage %s", ok, refused, after.usage)
		if ok < 1 || refused < 1 || after.usage > 5_000_000 {
			t.Fatalf("capped: %d served, %d refused, usage %s", ok, refused, after.usage)
		}
	})

	t.Run("no chat form", func(t *testing.T) {
		r := c.mustPost("/responses", key, `{"model":"rt/chat","input":"x","previous_response_id":"resp_1"}`, nil)
		r.expectError(t, 400, "previous_response_id: not supported by this model's provider; send the conversation in input")
		r = c.mustPost("/responses", key, `{"model":"rt/chat","input":[{"type":"item_reference","id":"x"}]}`, nil)
		r.expectError(t, 400, `input[0].type: "item_reference" is not supported by this model's provider`)
	})
}

// scriptedChatUpstream is a chat-only provider with fixed answers by
// model: "err-up" streams some text, then an error chunk (as
// OpenRouter-style providers report a failure after 200), then [DONE];
// "tool-up" calls the function weather({"city":"Köln"}), plain or streamed.
func scriptedChatUpstream(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/v1/chat/completions" {
			http.Error(w, "only chat completions here", http.StatusNotFound)
			return
		}
		if offContract(t, w, r, body) {
			return
		}
		model, stream := gjson.GetBytes(body, "model").Str, gjson.GetBytes(body, "stream").Bool()
		var chunks []string
		switch {
		case model == "err-up":
			chunks = []string{
				`{"id":"c","object":"chat.completion.chunk","created":1,"model":"err-up","choices":[{"index":0,"delta":{"role":"assistant","content":"Bonjour "},"finish_reason":null}]}`,
				`{"id":"c","object":"chat.completion.chunk","created":1,"model":"err-up","choices":[{"index":0,"delta":{"content":"à tous"},"finish_reason":null}]}`,
				`{"id":"c","object":"chat.completion.chunk","created":1,"model":"err-up","error":{"code":502,"message":"upstream model crashed"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}`,
				`[DONE]`,
			}
		case model == "tool-up" && !stream:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"tool-up","choices":[{"index":0,"finish_reason":"tool_calls",`+
				`"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Köln\"}"}}]}}],`+
				`"usage":{"prompt_tokens":20,"completion_tokens":8,"total_tokens":28}}`)
			return
		case model == "tool-up":
			chunks = []string{
				`{"id":"c","object":"chat.completion.chunk","created":1,"model":"tool-up","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"weather","arguments":""}}]},"finish_reason":null}]}`,
				`{"id":"c","object":"chat.completion.chunk","created":1,"model":"tool-up","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null}]}`,
				`{"id":"c","object":"chat.completion.chunk","created":1,"model":"tool-up","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Köln\"}"}}]},"finish_reason":null}]}`,
				`{"id":"c","object":"chat.completion.chunk","created":1,"model":"tool-up","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
				`{"id":"c","object":"chat.completion.chunk","created":1,"model":"tool-up","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":8,"total_tokens":28}}`,
				`[DONE]`,
			}
		default:
			http.Error(w, "unknown model", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, d := range chunks {
			fmt.Fprintf(w, "data: %s\n\n", d)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return "http://" + strings.TrimPrefix(srv.URL, "http://") + "/v1"
}

// A chat provider's error chunk mid-stream, and function calls, through
// the translation.
func TestResponsesTranslatedErrorsAndTools(t *testing.T) {
	up := scriptedChatUpstream(t)
	startInProcessWith(t, withModels(t,
		apiModel("rt/err", [4]string{"erring", up, "err-up", "chat"}),
		apiModel("rt/tool", [4]string{"tooling", up, "tool-up", "chat"})))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"errors"}`)

	before := c.snapshot(key, org.MgmtKey)
	body := `{"model":"rt/err","stream":true,"input":"Salut"}`
	evs := readResponsesEvents(t, c, key, body)
	var text strings.Builder
	for _, e := range evs {
		text.WriteString(e.doc.Get("delta").Str)
	}
	n := len(evs)
	if text.String() != "Bonjour à tous" || n < 2 || evs[n-2].doc.Get("type").Str != "error" || evs[n-1].doc.Get("type").Str != "response.failed" {
		t.Fatalf("events %s, text %q", eventTypes(evs), text.String())
	}
	if e := evs[n-2].doc; e.Get("code").Str != "502" || e.Get("message").Str != "upstream model crashed" || !e.Get("param").Exists() {
		t.Fatalf("error event %s", e.Raw)
	}
	if r := evs[n-1].doc.Get("response"); r.Get("status").Str != "failed" || r.Get("error.message").Str != "upstream model crashed" {
		t.Fatalf("response.failed %s", r.Raw)
	}
	// No usage came: the text sent is charged by the abort rule, on the
	// prompt estimate of the translated body.
	chat := `{"model":"err-up","messages":[{"role":"user","content":"Salut"}],"stream":true,"stream_options":{"include_usage":true}}`
	want := tokenCost(promptEstimate(chat), textEstimate(len("Bonjour à tous")))
	expectCharged(t, before, c.waitUsage(key, org.MgmtKey, before, 5*time.Second, 50*time.Millisecond), want, "error chunk")

	// A function call, plain and streamed, charged at the reported usage.
	tools := `"tools":[{"type":"function","name":"weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]`
	before = c.snapshot(key, org.MgmtKey)
	r := c.mustPost("/responses", key, `{"model":"rt/tool","input":"Wetter in Köln?",`+tools+`}`, nil).expect(t, 200)
	call := r.JSON.Get("output.0")
	if call.Get("type").Str != "function_call" || call.Get("call_id").Str != "call_1" || call.Get("name").Str != "weather" ||
		call.Get("arguments").Str != `{"city":"Köln"}` || r.JSON.Get("output.#").Int() != 1 || r.JSON.Get("status").Str != "completed" {
		t.Fatalf("function call answer %s", r.Body)
	}
	expectCharged(t, before, c.snapshot(key, org.MgmtKey), costOf(t, "tool", r.JSON.Get("usage")), "tool call")
	evs = readResponsesEvents(t, c, key, `{"model":"rt/tool","stream":true,"input":"Wetter in Köln?",`+tools+`}`)
	want2 := "response.created response.in_progress response.output_item.added response.function_call_arguments.delta " +
		"response.function_call_arguments.done response.output_item.done response.completed"
	final := evs[len(evs)-1].doc.Get("response.output.0")
	if got := eventTypes(evs); got != want2 || final.Get("type").Str != "function_call" || final.Get("call_id").Str != "call_1" ||
		final.Get("name").Str != "weather" || final.Get("arguments").Str != `{"city":"Köln"}` || final.Get("status").Str != "completed" {
		t.Fatalf("streamed function call: %s; %s", got, final.Raw)
	}
}
