package translate

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/tollgate-dev/caddy-tollgate/handlers/mockprovider"
)

// Helpers for tests that use the mock provider as the upstream, such as the
// translation's comparison with a native Responses answer.

// mockServer serves a mock provider on a real listener.
func mockServer(t *testing.T) *httptest.Server {
	t.Helper()
	m := new(mockprovider.Handler)
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.WriteHeader(http.StatusTeapot)
		return nil
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := m.ServeHTTP(w, r, next); err != nil {
			t.Errorf("ServeHTTP: %v", err)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

type mockResult struct {
	status int
	header http.Header
	body   string
}

func mockPost(t *testing.T, srv *httptest.Server, path, body string) mockResult {
	t.Helper()
	resp, err := srv.Client().Post(srv.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return mockResult{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

type mockEvent struct {
	event string // the event: line, if any
	data  string
}

// mockParseSSE splits a stream into events and fails on malformed lines.
func mockParseSSE(t *testing.T, body string) []mockEvent {
	t.Helper()
	var events []mockEvent
	var cur mockEvent
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data == "" {
				t.Fatalf("event without data: %+v", cur)
			}
			events = append(events, cur)
			cur = mockEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if cur != (mockEvent{}) {
		events = append(events, cur) // an unterminated event of a cut stream
	}
	return events
}

// mockResponsesBody is a Responses request with instructions, a developer
// message and a past turn; %s takes extra fields.
const mockResponsesBody = `{"model":"m1","instructions":"Be brief.","input":[
	{"role":"developer","content":"Use plain words."},
	{"type":"message","role":"user","content":[{"type":"input_text","text":"first question"}]},
	{"type":"message","role":"assistant","content":[{"type":"output_text","text":"first answer here"}]},
	{"role":"user","content":"Say hello to the world"}
]%s}`
