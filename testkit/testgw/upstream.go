package testgw

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// MockUpstream serves h on a real listener, so that flushing and aborted
// connections behave as they do behind Caddy. Paths h does not own answer
// 418 from the next handler.
func MockUpstream(t testing.TB, h caddyhttp.MiddlewareHandler) *httptest.Server {
	t.Helper()
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.WriteHeader(http.StatusTeapot)
		return nil
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h.ServeHTTP(w, r, next); err != nil {
			t.Errorf("ServeHTTP: %v", err)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// UpstreamResult is an answer of a MockUpstream.
type UpstreamResult struct {
	Status int
	Header http.Header
	Body   string
	Err    error // error reading the body
}

// Do sends a JSON request to srv; header holds name/value pairs.
func Do(t testing.TB, srv *httptest.Server, method, path, body string, header ...string) UpstreamResult {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return UpstreamResult{Status: resp.StatusCode, Header: resp.Header, Body: string(b), Err: err}
}

// Post is Do with method POST.
func Post(t testing.TB, srv *httptest.Server, path, body string, header ...string) UpstreamResult {
	t.Helper()
	return Do(t, srv, http.MethodPost, path, body, header...)
}

// Event is one server-sent event.
type Event struct {
	Name string // the event: line, if any
	Data string
}

// ParseSSE splits a stream into events and fails on malformed lines. An
// unterminated last event (a cut stream's) is kept.
func ParseSSE(t testing.TB, body string) []Event {
	t.Helper()
	var events []Event
	var cur Event
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Data == "" {
				t.Fatalf("event without data: %+v", cur)
			}
			events = append(events, cur)
			cur = Event{}
		case strings.HasPrefix(line, "event: "):
			cur.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.Data = strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if cur != (Event{}) {
		events = append(events, cur)
	}
	return events
}

// ResponsesBody is a Responses request with instructions, a developer
// message and a past turn; %s takes extra fields.
const ResponsesBody = `{"model":"m1","instructions":"Be brief.","input":[
	{"role":"developer","content":"Use plain words."},
	{"type":"message","role":"user","content":[{"type":"input_text","text":"first question"}]},
	{"type":"message","role":"assistant","content":[{"type":"output_text","text":"first answer here"}]},
	{"role":"user","content":"Say hello to the world"}
]%s}`
