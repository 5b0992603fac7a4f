package answer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/sse"
)

// writeLog is the client's side of a Writer: it records every call that
// reaches it, in order.
type writeLog struct {
	rec     *httptest.ResponseRecorder
	status  int      // 0 until WriteHeader
	writes  []string // one entry per Write
	flushes int
}

func newWriteLog() *writeLog { return &writeLog{rec: httptest.NewRecorder()} }

func (l *writeLog) Header() http.Header { return l.rec.Header() }

func (l *writeLog) WriteHeader(status int) {
	if l.status == 0 {
		l.status = status
	}
	l.rec.WriteHeader(status)
}

func (l *writeLog) Write(p []byte) (int, error) {
	if l.status == 0 {
		l.status = http.StatusOK
	}
	l.writes = append(l.writes, string(p))
	return l.rec.Write(p)
}

func (l *writeLog) Flush() { l.flushes++ }

func (l *writeLog) body() string { return strings.Join(l.writes, "") }

// streamWriter is a Writer on a log, with an event-stream answer begun.
func streamWriter(t *testing.T, kind string) (*Writer, *writeLog) {
	t.Helper()
	log := newWriteLog()
	mw := NewWriter(log, dialect.Kind(kind))
	mw.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	mw.Header().Set("Content-Length", "999")
	mw.WriteHeader(http.StatusOK)
	if mw.Mode != sse.Stream || log.status != http.StatusOK {
		t.Fatalf("mode %d, client status %d: the stream's header must be sent at once", mw.Mode, log.status)
	}
	if cl := log.Header().Get("Content-Length"); cl != "" {
		t.Errorf("Content-Length = %q on a stream", cl)
	}
	return mw, log
}

func mustWrite(t *testing.T, mw *Writer, s string) {
	t.Helper()
	n, err := mw.Write([]byte(s))
	if err != nil || n != len(s) {
		t.Fatalf("Write(%q) = %d, %v", s, n, err)
	}
}

// chunk is a chat-completion stream event carrying content.
func chunk(content string) string {
	return `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":` +
		strconv.Quote(content) + `}}]}` + "\n\n"
}

func TestMeterWriterStreamPassesEventByEvent(t *testing.T) {
	mw, log := streamWriter(t, "chat")
	role := `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n"
	e1, e2, e3 := chunk("Hello"), chunk(", wörld"), chunk("!")
	comment := ": keep-alive\n\n"
	finish := `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}` + "\n\n"
	usage := `data: {"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":4,"total_tokens":16}}` + "\n\n"
	done := "data: [DONE]\n\n"

	var want []string
	step := func(write string, forwarded ...string) {
		t.Helper()
		mustWrite(t, mw, write)
		want = append(want, forwarded...)
		if strings.Join(log.writes, "|") != strings.Join(want, "|") {
			t.Fatalf("after Write(%q) the client has\n%q\nwant\n%q", write, log.writes, want)
		}
	}
	step(role, role)
	step(e1, e1)
	// an event split across writes is forwarded once complete, whole
	step(e2[:10])
	step(e2[10 : len(e2)-1])
	step(e2[len(e2)-1:], e2)
	// two events in one write are forwarded as two events
	step(e3+comment, e3, comment)
	// an event and the start of the next
	step(finish+usage[:20], finish)
	// the usage event and everything after it wait for the charge
	step(usage[20:])
	step(chunk("late"))
	step(done)
	if mw.Delivered != len("Hello, wörld!late") {
		t.Errorf("delivered = %d, want %d", mw.Delivered, len("Hello, wörld!late"))
	}
	if !mw.Usage.OK || mw.Usage.Prompt != 12 || mw.Usage.Completion != 4 || !mw.SawDone || mw.Finish != "stop" {
		t.Errorf("usage %+v sawDone %v finish %q", mw.Usage, mw.SawDone, mw.Finish)
	}
	flushes := log.flushes
	if err := mw.SendTail(testAmount("0.000032")); err != nil {
		t.Fatal(err)
	}
	usageWithCost := `data: {"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":4,"total_tokens":16,"cost":0.000032}}` + "\n\n"
	want = append(want, usageWithCost, chunk("late"), done)
	if strings.Join(log.writes, "|") != strings.Join(want, "|") {
		t.Errorf("client got\n%q\nwant\n%q", log.writes, want)
	}
	if log.flushes != flushes+1 {
		t.Errorf("sendTail flushed %d times", log.flushes-flushes)
	}
	if len(mw.tail) != 0 {
		t.Errorf("tail kept %d events", len(mw.tail))
	}
}

func TestMeterWriterStreamEventLines(t *testing.T) {
	// event: and id: lines before data:, data: without a space, CR-free
	mw, log := streamWriter(t, "chat")
	ev := "event: message\nid: 7\ndata:" + `{"choices":[{"delta":{"content":"abc"}}]}` + "\n\n"
	mustWrite(t, mw, ev)
	if log.body() != ev || mw.Delivered != 3 {
		t.Errorf("client got %q, delivered %d", log.body(), mw.Delivered)
	}
	u := "event: message\ndata: " + `{"choices":[{"delta":{"content":"de"},"finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}` + "\n\n"
	mustWrite(t, mw, u)
	if log.body() != ev || mw.Delivered != 5 || mw.Finish != "length" {
		t.Errorf("usage event forwarded early: %q (delivered %d, finish %q)", log.body(), mw.Delivered, mw.Finish)
	}
	if err := mw.SendTail(testAmount("1.5")); err != nil {
		t.Fatal(err)
	}
	wantTail := "event: message\ndata: " + `{"choices":[{"delta":{"content":"de"},"finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"cost":1.5}}` + "\n\n"
	if log.body() != ev+wantTail {
		t.Errorf("client got %q", log.body())
	}
	if mw.SawDone {
		t.Error("sawDone without [DONE]")
	}
}

func TestMeterWriterResponsesStream(t *testing.T) {
	mw, log := streamWriter(t, "responses")
	created := "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\"}}\n\n"
	added := "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"item\":{\"type\":\"message\"}}\n\n"
	d1 := "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi \"}\n\n"
	d2 := "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"there\"}\n\n"
	completed := "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"usage\":{\"input_tokens\":9,\"output_tokens\":2,\"total_tokens\":11}}}\n\n"
	done := "data: [DONE]\n\n"
	for _, ev := range []string{created, added, d1, d2} {
		mustWrite(t, mw, ev)
	}
	if log.body() != created+added+d1+d2 {
		t.Fatalf("client got %q", log.body())
	}
	mustWrite(t, mw, completed+done)
	if log.body() != created+added+d1+d2 {
		t.Errorf("terminal event forwarded before the charge: %q", log.body())
	}
	if mw.Delivered != len("Hi there") || !mw.Usage.OK || mw.Usage.Prompt != 9 || mw.Usage.Completion != 2 ||
		!mw.SawDone || mw.Finish != "completed" {
		t.Errorf("delivered %d usage %+v sawDone %v finish %q", mw.Delivered, mw.Usage, mw.SawDone, mw.Finish)
	}
	if err := mw.SendTail(testAmount("0.000013")); err != nil {
		t.Fatal(err)
	}
	wantCompleted := "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"usage\":{\"input_tokens\":9,\"output_tokens\":2,\"total_tokens\":11,\"cost\":0.000013}}}\n\n"
	if got := strings.TrimPrefix(log.body(), created+added+d1+d2); got != wantCompleted+done {
		t.Errorf("tail = %q\nwant %q", got, wantCompleted+done)
	}

	// an incomplete response is terminal too
	mw, _ = streamWriter(t, "responses")
	mustWrite(t, mw, "data: {\"type\":\"response.incomplete\",\"response\":{\"usage\":{\"input_tokens\":1,\"output_tokens\":5}}}\n\n")
	if !mw.SawDone || mw.Finish != "incomplete" || mw.Usage.Completion != 5 || len(mw.tail) != 1 {
		t.Errorf("incomplete: sawDone %v finish %q usage %+v tail %d", mw.SawDone, mw.Finish, mw.Usage, len(mw.tail))
	}
}

func TestMeterWriterFlush(t *testing.T) {
	// a stream's flushes reach the client
	mw, log := streamWriter(t, "chat")
	mustWrite(t, mw, chunk("a"))
	if err := http.NewResponseController(mw).Flush(); err != nil {
		t.Fatal(err)
	}
	if log.flushes != 1 {
		t.Errorf("stream flushes = %d, want 1", log.flushes)
	}

	// buffered answers send nothing, not even the header, before the end
	for _, tt := range []struct {
		name   string
		status int
		ct     string
	}{
		{"undecided", 0, ""},
		{"json", http.StatusOK, "application/json"},
		{"error", http.StatusInternalServerError, "text/event-stream"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			log := newWriteLog()
			mw := NewWriter(log, "chat")
			if tt.ct != "" {
				mw.Header().Set("Content-Type", tt.ct)
			}
			if tt.status != 0 {
				mw.WriteHeader(tt.status)
				mustWrite(t, mw, `{"choices":[]`)
			}
			if err := mw.FlushError(); err != nil {
				t.Fatal(err)
			}
			if err := http.NewResponseController(mw).Flush(); err != nil {
				t.Fatal(err)
			}
			if log.flushes != 0 || log.status != 0 || len(log.writes) != 0 {
				t.Errorf("client saw flushes %d status %d writes %q", log.flushes, log.status, log.writes)
			}
		})
	}
}

func TestMeterWriterReadFrom(t *testing.T) {
	// reverse_proxy may copy with ReadFrom: the events still go through
	// Write, one small read at a time
	mw, log := streamWriter(t, "chat")
	e1, e2 := chunk("one"), chunk("two")
	usage := `data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}` + "\n\n"
	n, err := mw.ReadFrom(iotest.OneByteReader(strings.NewReader(e1 + e2 + usage + "data: [DONE]\n\n")))
	if err != nil || n != int64(len(e1+e2+usage)+len("data: [DONE]\n\n")) {
		t.Fatalf("ReadFrom = %d, %v", n, err)
	}
	if strings.Join(log.writes, "|") != e1+"|"+e2 {
		t.Errorf("client got %q", log.writes)
	}
	if mw.Delivered != 6 || !mw.Usage.OK || !mw.SawDone || len(mw.tail) != 2 {
		t.Errorf("delivered %d usage %+v sawDone %v tail %d", mw.Delivered, mw.Usage, mw.SawDone, len(mw.tail))
	}

	// and a JSON answer read with ReadFrom is buffered
	log = newWriteLog()
	mw = NewWriter(log, "chat")
	mw.Header().Set("Content-Type", "application/json")
	body := `{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`
	if _, err := mw.ReadFrom(strings.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	if !mw.AnswerHeld() || mw.Body.String() != body || log.status != 0 || len(log.writes) != 0 {
		t.Errorf("mode %d buf %q, client status %d writes %q", mw.Mode, mw.Body.String(), log.status, log.writes)
	}
}

func TestMeterWriterJSON(t *testing.T) {
	body := `{"id":"chatcmpl-1","object":"chat.completion","model":"m-upstream",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"Hello there"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}}`
	log := newWriteLog()
	mw := NewWriter(log, "chat")
	mw.Header().Set("Content-Type", "application/json")
	mw.Header().Set("Content-Length", strconv.Itoa(len(body)))
	mw.Header().Set("X-Generation-Id", "gen-early")
	mw.WriteHeader(http.StatusOK)
	mustWrite(t, mw, body[:30])
	mustWrite(t, mw, body[30:])
	if log.status != 0 || len(log.writes) != 0 {
		t.Fatalf("JSON sent before the charge: status %d writes %q", log.status, log.writes)
	}
	if !mw.readJSONUsage() {
		t.Fatal("readJSONUsage = false")
	}
	// With usage reported, the text is not read: usage is the charge's basis.
	if !mw.Usage.OK || mw.Usage.Prompt != 10 || mw.Usage.Completion != 3 || mw.Delivered != 0 || mw.Finish != "stop" {
		t.Errorf("usage %+v delivered %d finish %q", mw.Usage, mw.Delivered, mw.Finish)
	}
	if err := mw.SendJSON(testAmount("0.000016"), "gen-1"); err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(body, `"total_tokens":13}`, `"total_tokens":13,"cost":0.000016}`, 1)
	if log.body() != want || len(log.writes) != 1 {
		t.Errorf("client got %q\nwant %q", log.writes, want)
	}
	h := log.Header()
	if log.status != http.StatusOK || h.Get("Content-Length") != strconv.Itoa(len(want)) ||
		h.Get("X-Generation-Id") != "gen-1" || h.Get("Content-Type") != "application/json" {
		t.Errorf("status %d headers %v", log.status, h)
	}

	// Responses JSON: usage at the top level, text in output[].content[]
	rbody := `{"id":"resp_1","object":"response","status":"incomplete","output":[{"type":"message","content":[{"type":"output_text","text":"ab"},{"type":"output_text","text":"cde"}]},{"type":"message","content":[{"type":"output_text","text":"f"}]}],` +
		`"usage":{"input_tokens":4,"output_tokens":2}}`
	log = newWriteLog()
	mw = NewWriter(log, "responses")
	mustWrite(t, mw, rbody) // no WriteHeader: 200
	if !mw.readJSONUsage() || mw.Usage.Prompt != 4 || mw.Usage.Completion != 2 || mw.Delivered != 0 || mw.Finish != "incomplete" {
		t.Errorf("responses: usage %+v delivered %d finish %q", mw.Usage, mw.Delivered, mw.Finish)
	}
	// Without usage, the output text is what the charge is estimated from.
	noUsage := NewWriter(newWriteLog(), "responses")
	mustWrite(t, noUsage, rbody[:strings.LastIndex(rbody, `,"usage"`)]+"}")
	if !noUsage.readJSONUsage() || noUsage.Usage.OK || noUsage.Delivered != 6 || noUsage.Finish != "incomplete" {
		t.Errorf("responses without usage: %+v delivered %d finish %q", noUsage.Usage, noUsage.Delivered, noUsage.Finish)
	}
	if err := mw.SendJSON(testAmount("0"), "gen-2"); err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(rbody, `"output_tokens":2}`, `"output_tokens":2,"cost":0}`, 1); log.body() != want || log.status != 200 {
		t.Errorf("responses: %d %q", log.status, log.body())
	}

	// without usage the answer is sent as it came
	plain := `{"choices":[{"message":{"content":"hey"}}]}`
	log = newWriteLog()
	mw = NewWriter(log, "chat")
	mustWrite(t, mw, plain)
	if !mw.readJSONUsage() || mw.Usage.OK || mw.Delivered != 3 {
		t.Errorf("no usage: usage %+v delivered %d", mw.Usage, mw.Delivered)
	}
	if err := mw.SendJSON(testAmount("0.1"), "gen-3"); err != nil {
		t.Fatal(err)
	}
	if log.body() != plain || log.Header().Get("Content-Length") != strconv.Itoa(len(plain)) {
		t.Errorf("no usage: %q %v", log.body(), log.Header())
	}

	// not a JSON object
	for _, bad := range []string{`<html>bad gateway</html>`, `[1,2]`, `{"usage":`, ``} {
		mw = NewWriter(newWriteLog(), "chat")
		mw.WriteHeader(http.StatusOK)
		if bad != "" {
			mustWrite(t, mw, bad)
		}
		if mw.readJSONUsage() {
			t.Errorf("readJSONUsage(%q) = true", bad)
		}
	}
}

func TestMeterWriterErrorStatusBuffered(t *testing.T) {
	for _, status := range []int{400, 429, 500, 503} {
		log := newWriteLog()
		mw := NewWriter(log, "chat")
		// even an error that says it is a stream is held
		mw.Header().Set("Content-Type", "text/event-stream")
		mw.WriteHeader(status)
		mw.WriteHeader(http.StatusOK) // later calls change nothing
		mustWrite(t, mw, `{"error":{"message":"upstream `)
		mustWrite(t, mw, `says no"}}`)
		if !mw.UpstreamFailed() || mw.Status != status || mw.Body.String() != `{"error":{"message":"upstream says no"}}` {
			t.Errorf("%d: mode %d status %d buf %q", status, mw.Mode, mw.Status, mw.Body.String())
		}
		if log.status != 0 || len(log.writes) != 0 {
			t.Errorf("%d: error forwarded: status %d writes %q", status, log.status, log.writes)
		}
	}
}

func TestMeterWriterBufferBound(t *testing.T) {
	mw := NewWriter(newWriteLog(), "chat")
	mw.WriteHeader(http.StatusOK)
	big := bytes.Repeat([]byte("a"), MaxBufferedBody)
	if n, err := mw.Write(big); err != nil || n != len(big) {
		t.Fatalf("Write at the bound = %d, %v", n, err)
	}
	if n, err := mw.Write([]byte("b")); err != sse.ErrTooLarge || n != 0 {
		t.Errorf("Write over the bound = %d, %v", n, err)
	}
}

func TestMeterWriterClientGone(t *testing.T) {
	log := &failingWriter{writeLog: newWriteLog()}
	mw := NewWriter(log, "chat")
	mw.Header().Set("Content-Type", "text/event-stream")
	mw.WriteHeader(http.StatusOK)
	if _, err := mw.Write([]byte(chunk("x"))); err == nil {
		t.Error("Write to a gone client succeeded")
	}
	if !mw.ClientGone() {
		t.Error("clientGone not set")
	}
}

// failingWriter fails every body write, as a closed connection does.
type failingWriter struct{ *writeLog }

func (f *failingWriter) Write([]byte) (int, error) { return 0, http.ErrHandlerTimeout }

func TestMeterWriterCRLFStream(t *testing.T) {
	// Servers built on sse-starlette end lines with CRLF.
	mw, log := streamWriter(t, "chat")
	e1 := "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\r\n\r\n"
	usage := "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":1}}\r\n\r\n"
	done := "data: [DONE]\r\n\r\n"
	mustWrite(t, mw, e1[:7])
	mustWrite(t, mw, e1[7:]+usage[:5])
	if log.body() != e1 || mw.Delivered != 2 {
		t.Fatalf("client got %q, delivered %d", log.body(), mw.Delivered)
	}
	mustWrite(t, mw, usage[5:]+done)
	if log.body() != e1 || !mw.Usage.OK || !mw.SawDone {
		t.Fatalf("client got %q, usage %+v, sawDone %v", log.body(), mw.Usage, mw.SawDone)
	}
	if err := mw.SendTail(testAmount("0.000004")); err != nil {
		t.Fatal(err)
	}
	want := e1 + "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":1,\"cost\":0.000004}}\r\n\r\n" + done
	if log.body() != want {
		t.Errorf("client got %q\nwant %q", log.body(), want)
	}
}

// TestReadAnswerMembersMatchesLookups: the meter's single pass over an
// answer finds what a gjson lookup of each path finds, at the same offsets.
func TestReadAnswerMembersMatchesLookups(t *testing.T) {
	docs := []string{
		`{"id":"a","choices":[{"message":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1}}`,
		" \n{ \"usage\" : {} , \"id\":\"b\", \"choices\":[{\"finish_reason\":null}] }",
		`{"id":"first","id":"second","usage":{"a":1},"usage":{"b":2},"choices":[],"choices":[{"finish_reason":"length"}]}`,
		`{"\u0069d":"escaped","us\u0061ge":{"x":1},"choices":{"0":{"finish_reason":"odd"}}}`,
		`{"object":"response","status":"completed","usage":{"input_tokens":3},"id":"resp_1"}`,
		`{"choices":[{"delta":{}}]}`,
		`[{"id":"in an array"}]`,
		`{"choices":[{"message":{"content":"a \\\"quoted\\\" ] } [ { text\\\\"},"finish_reason":"length"}],"id":"x\\\\","usage":{"n":[1,{"m":"}"}]}}`,
		`{"choices":[{"fin\u0069sh_reason":"escaped"}],"usage":{}}`,
		`{"choices":[null,{"finish_reason":"second"}],"choices":[{"finish_reason":"later"}]}`,
		`{"choices":[],"usage":{"x":1}`,
		`{"id":"a" "usage":{}}`,
		`{"id":"unterminated}`,
		` {"usage" : { } , "id" : 1e3 } `,
		`{}`,
		`"text"`,
	}
	for _, doc := range docs {
		if diff := answerMembersDiff(doc); diff != "" {
			t.Error(diff)
		}
	}
}

// answerMembersDiff compares readAnswerMembers with gjson's lookups of the
// same paths on doc, for both APIs; "" when they agree.
func answerMembersDiff(doc string) string {
	for _, responses := range []bool{false, true} {
		finishPath := "choices.0.finish_reason"
		if responses {
			finishPath = "status"
		}
		got := readAnswerMembers([]byte(doc), responses, nil)
		for _, c := range []struct {
			path string
			got  gjson.Result
		}{{"id", got.id}, {"usage", got.usage}, {finishPath, got.finish}} {
			want := gjson.Get(doc, c.path)
			if c.got.Raw != want.Raw || c.got.Str != want.Str || (want.Exists() && c.got.Index != want.Index) {
				return fmt.Sprintf("%s in %s: got %q at %d, lookup %q at %d", c.path, doc, c.got.Raw, c.got.Index, want.Raw, want.Index)
			}
		}
	}
	return ""
}

func TestUsageOfReadsCacheDetailsOfBothAPIs(t *testing.T) {
	chat := usageOf(gjson.Parse(`{"prompt_tokens":100,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":60,"cache_write_tokens":30}}`), false)
	if chat != (UsageSeen{OK: true, Prompt: 100, Completion: 5, CacheRead: 60, CacheWrite: 30}) {
		t.Errorf("chat %+v", chat)
	}
	resp := usageOf(gjson.Parse(`{"input_tokens":100,"output_tokens":5,"input_tokens_details":{"cached_tokens":60}}`), true)
	if resp != (UsageSeen{OK: true, Prompt: 100, Completion: 5, CacheRead: 60}) {
		t.Errorf("responses %+v", resp)
	}
}

// The gateway's usage members replace any the provider sent under the same
// names, also when a \u escape spells the name; other members stay.
func TestWithCostReplacesTheProvidersOwnMembers(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"usage":{"total_tokens":3}}`, `{"usage":{"total_tokens":3,"cost":0.5}}`},
		{`{"usage":{}}`, `{"usage":{"cost":0.5}}`},
		{`{"usage":{"cost":9,"total_tokens":3,"is_byok":true}}`, `{"usage":{"total_tokens":3,"cost":0.5}}`},
		{`{"usage":{"total_tokens":3,"\u0063ost":9}}`, `{"usage":{"total_tokens":3,"cost":0.5}}`},
		{`{"usage":{"costs":9,"cost_details":{"x":1}}}`, `{"usage":{"costs":9,"cost":0.5}}`},
	} {
		doc := []byte(c.in)
		u := gjson.GetBytes(doc, "usage")
		if got := string(withCost(doc, u, "usage", `"cost":0.5`)); got != c.want {
			t.Errorf("withCost(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

// On any valid JSON, the one-pass reader finds what gjson's lookups find.
func FuzzReadAnswerMembersMatchesLookups(f *testing.F) {
	f.Add(`{"id":"a","choices":[{"message":{"content":"x \"]}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1}}`)
	f.Add(`{"status":"completed","usage":{"input_tokens":3},"id":"resp_1"}`)
	f.Add(`{"choices":[{"fin\u0069sh_reason":"e"}],"\u0075sage":{}}`)
	f.Fuzz(func(t *testing.T, doc string) {
		if !json.Valid([]byte(doc)) {
			return
		}
		if diff := answerMembersDiff(doc); diff != "" {
			t.Fatal(diff)
		}
	})
}

// A Messages usage's cache_creation splits its writes by TTL, in a whole
// answer and in a stream's message_start; a member of a form not read is
// noted, never refused.
func TestMessagesUsageReadsTheCacheWritesSplitByTTL(t *testing.T) {
	u := messagesUsage(gjson.Parse(`{"input_tokens":10,"cache_read_input_tokens":20,"cache_creation_input_tokens":70,`+
		`"cache_creation":{"ephemeral_5m_input_tokens":30,"ephemeral_1h_input_tokens":40},"output_tokens":5}`), UsageSeen{})
	if u != (UsageSeen{OK: true, Prompt: 100, Completion: 5, CacheRead: 20, CacheWrite: 70, CacheWrite1h: 40}) {
		t.Errorf("usage %+v", u)
	}
	start := messagesUsage(gjson.Parse(`{"input_tokens":10,"cache_creation_input_tokens":70,"cache_creation":{"ephemeral_1h_input_tokens":70},"output_tokens":1}`), UsageSeen{})
	if end := messagesUsage(gjson.Parse(`{"output_tokens":9}`), start); end.CacheWrite1h != 70 || end.Completion != 9 {
		t.Errorf("stream end %+v", end)
	}
	for _, cc := range []string{`{"ephemeral_24h_input_tokens":5}`, `{"ephemeral_1h_input_tokens":"5"}`, `[]`} {
		u := messagesUsage(gjson.Parse(`{"input_tokens":1,"cache_creation_input_tokens":5,"cache_creation":`+cc+`,"output_tokens":1}`), UsageSeen{})
		if !u.CacheUnknown || u.CacheWrite1h != 0 || u.CacheWrite != 5 || u.PromptBad {
			t.Errorf("cache_creation %s: %+v", cc, u)
		}
	}
	if u := messagesUsage(gjson.Parse(`{"input_tokens":1,"cache_creation":null,"output_tokens":1}`), UsageSeen{}); u.CacheUnknown {
		t.Errorf("null cache_creation: %+v", u)
	}
}

// A cache count of a form the meter does not read is noted, whatever the
// API; the known ones are not.
func TestUnknownCacheCountsAreNoted(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"prompt_tokens":10,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":2,"cache_write_tokens":1}}`: false,
		`{"prompt_tokens":10,"completion_tokens":1,"prompt_cache_hit_tokens":4,"prompt_cache_miss_tokens":6}`:           true,
		`{"prompt_tokens":10,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":2,"cache_1h_tokens":1}}`:    true,
	} {
		if got := usageOf(gjson.Parse(raw), false); got.CacheUnknown != want || got.Prompt != 10 {
			t.Errorf("%s: %+v", raw, got)
		}
	}
	if u := messagesUsage(gjson.Parse(`{"input_tokens":1,"cache_read_input_tokens":2,"cache_storage_tokens":3,"output_tokens":1}`), UsageSeen{}); !u.CacheUnknown || u.Prompt != 3 {
		t.Errorf("messages: %+v", u)
	}
	if u := messagesUsage(gjson.Parse(`{"input_tokens":1,"cache_read_input_tokens":2,"cache_creation_input_tokens":0,"cache_creation":null,"output_tokens":1}`), UsageSeen{}); u.CacheUnknown {
		t.Errorf("messages known: %+v", u)
	}
}
