package sse

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

// upper is a converter that turns each chunk into one "x" event of its
// data in upper case, finishes on a chunk "fin", and wraps a held body.
type upper struct {
	ca               *ChatAnswer
	started          bool
	finished, closed bool
}

func (u *upper) Chunk(data []byte) {
	switch d := string(data); d {
	case "[DONE]":
		u.closed = true
		u.ca.Out = append(u.ca.Out, "event: x\ndata: END\n\n"...)
	default:
		u.started = true
		u.finished = u.finished || d == "fin"
		u.ca.Out = append(u.ca.Out, "event: x\ndata: "+strings.ToUpper(d)+"\n\n"...)
	}
}

func (u *upper) Unfinished() bool { return u.started && u.finished && !u.closed }

func (u *upper) ConvertJSON(body []byte) ([]byte, bool) {
	if !strings.HasPrefix(string(body), "{") {
		return nil, false
	}
	return append([]byte("converted:"), body...), true
}

func newChat(c *client) (*ChatAnswer, *upper) {
	ca := new(ChatAnswer)
	u := &upper{ca: ca}
	ca.InitChat(c, u)
	return ca, u
}

func TestChatAnswerStreamCompletedWithoutDone(t *testing.T) {
	c := newClient()
	ca, _ := newChat(c)
	ca.Header().Set("Content-Type", "text/event-stream")
	ca.Header().Set("Content-Length", "99")
	ca.WriteHeader(http.StatusOK)
	chunk := `{"choices":[{"delta":{"content":"hello"}}]}`
	if _, err := ca.Write([]byte("data: " + chunk + "\n\ndata: fin\n\n")); err != nil {
		t.Fatal(err)
	}
	if ca.Produced == 0 {
		t.Fatal("the chunk's output was not counted")
	}
	ca.Finish(nil)
	want := "event: x\ndata: " + strings.ToUpper(chunk) + "\n\nevent: x\ndata: FIN\n\nevent: x\ndata: END\n\n"
	if got := c.Body.String(); got != want {
		t.Fatalf("client got %q, want %q", got, want)
	}
	if c.Header().Get("Content-Length") != "" {
		t.Fatal("the converted stream kept the provider's Content-Length")
	}
}

func TestChatAnswerStreamCutIsLeftOpen(t *testing.T) {
	for _, tc := range []struct {
		name     string
		body     string
		proxyErr error
	}{
		{"no finish reason", "data: hi\n\n", nil},
		{"proxy error", "data: fin\n\n", errors.New("upstream cut")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient()
			ca, _ := newChat(c)
			ca.Header().Set("Content-Type", "text/event-stream")
			if _, err := ca.Write([]byte(tc.body)); err != nil {
				t.Fatal(err)
			}
			ca.Finish(tc.proxyErr)
			if strings.Contains(c.Body.String(), "END") {
				t.Fatalf("a cut stream was completed: %q", c.Body.String())
			}
		})
	}
}

func TestChatAnswerHeldAndPassed(t *testing.T) {
	c := newClient()
	ca, _ := newChat(c)
	ca.Header().Set("Content-Type", "application/json")
	if _, err := ca.Write([]byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	ca.Finish(nil)
	if got := c.Body.String(); got != `converted:{"a":1}` {
		t.Fatalf("held answer sent as %q", got)
	}

	c = newClient()
	ca, _ = newChat(c)
	ca.Header().Set("Content-Type", "application/json")
	ca.WriteHeader(http.StatusTooManyRequests)
	if _, err := ca.Write([]byte(`{"error":{}}`)); err != nil {
		t.Fatal(err)
	}
	ca.Finish(nil)
	if c.Code != http.StatusTooManyRequests || c.Body.String() != `{"error":{}}` {
		t.Fatalf("error status answer became %d %q", c.Code, c.Body.String())
	}
}
