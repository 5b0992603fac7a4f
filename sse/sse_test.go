package sse

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
)

// client records what reaches the client, one entry per Write.
type client struct {
	*httptest.ResponseRecorder
	writes  []string
	flushes int
	fail    error
}

func newClient() *client { return &client{ResponseRecorder: httptest.NewRecorder()} }

func (c *client) Write(p []byte) (int, error) {
	if c.fail != nil {
		return 0, c.fail
	}
	c.writes = append(c.writes, string(p))
	return c.ResponseRecorder.Write(p)
}

func (c *client) Flush() { c.flushes++ }

// hooks passes "pass" events, rewrites "up" to upper case, holds "hold"
// and drops "drop"; it streams text/event-stream, holds 2xx JSON and
// passes the rest.
type hooks struct {
	w    *Writer
	seen []string
	held [][]byte
}

func (h *hooks) Decide(status int) Mode {
	switch {
	case status >= 300:
		return Pass
	case strings.HasPrefix(h.w.Header().Get("Content-Type"), "text/event-stream"):
		return Stream
	}
	return Hold
}

func (h *hooks) Event(ev []byte) ([]byte, error) {
	data := Data(ev)
	h.seen = append(h.seen, string(data))
	switch string(data) {
	case "hold":
		h.held = append(h.held, bytes.Clone(ev))
		return nil, nil
	case "drop":
		return nil, nil
	case "up":
		return ReplaceData(ev, data, []byte("UP")), nil
	case "fail":
		return []byte("data: last\n\n"), errors.New("hook failed")
	}
	return ev, nil
}

func newWriter(c *client, ct string) (*Writer, *hooks) {
	w := new(Writer)
	h := &hooks{w: w}
	w.Init(c, h)
	if ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.Header().Set("Content-Length", "99")
	return w, h
}

func TestStreamEventByEvent(t *testing.T) {
	c := newClient()
	w, h := newWriter(c, "text/event-stream")
	w.WriteHeader(http.StatusEarlyHints) // interim: no state
	if w.Mode != Undecided || c.Code != http.StatusOK || len(c.writes) != 0 {
		t.Fatalf("interim response changed the state: mode %d", w.Mode)
	}
	w.WriteHeader(http.StatusOK)
	if w.Mode != Stream || c.Header().Get("Content-Length") != "" {
		t.Fatalf("mode %d, Content-Length %q", w.Mode, c.Header().Get("Content-Length"))
	}
	var want []string
	step := func(in string, out ...string) {
		t.Helper()
		if n, err := w.Write([]byte(in)); err != nil || n != len(in) {
			t.Fatalf("Write(%q) = %d, %v", in, n, err)
		}
		want = append(want, out...)
		if strings.Join(c.writes, "|") != strings.Join(want, "|") {
			t.Fatalf("after %q the client has %q, want %q", in, c.writes, want)
		}
	}
	step("data: pass\n\n", "data: pass\n\n")
	step("data: u")                                    // a partial event waits
	step("p\n\ndata: drop\n\n", "data: UP\n\n")        // rewritten; dropped
	step("data: hold\r\n\r\n: ping\n\n", ": ping\n\n") // CRLF; a comment passes
	if len(h.held) != 1 || string(h.held[0]) != "data: hold\r\n\r\n" || w.Body.Len() != 0 {
		t.Errorf("held %q, buffer %q", h.held, w.Body.String())
	}
	if err := w.FlushError(); err != nil || c.flushes != 1 {
		t.Errorf("flush: %v, %d", err, c.flushes)
	}
	if n, err := w.Write([]byte("data: fail\n\ndata: never\n\n")); err == nil || n != 0 {
		t.Errorf("a hook's error: %d, %v", n, err)
	}
	if c.writes[len(c.writes)-1] != "data: last\n\n" || strings.Contains(c.Body.String(), "never") {
		t.Errorf("client has %q", c.writes)
	}

	// ReadFrom goes through the hook too.
	c = newClient()
	w, _ = newWriter(c, "text/event-stream")
	if _, err := w.ReadFrom(iotest.OneByteReader(strings.NewReader("data: up\n\ndata: x\n\n"))); err != nil {
		t.Fatal(err)
	}
	if c.Body.String() != "data: UP\n\ndata: x\n\n" {
		t.Errorf("ReadFrom: %q", c.Body.String())
	}
}

func TestHoldAndPass(t *testing.T) {
	c := newClient()
	w, _ := newWriter(c, "application/json")
	w.Limit = 8
	w.WriteHeader(http.StatusContinue)
	if _, err := w.Write([]byte(`{"a":1}`)); err != nil { // 200 by default
		t.Fatal(err)
	}
	if w.Mode != Hold || w.Status != http.StatusOK || w.Body.String() != `{"a":1}` || len(c.writes) != 0 {
		t.Errorf("hold: mode %d status %d body %q, client %q", w.Mode, w.Status, w.Body.String(), c.writes)
	}
	if _, err := w.Write([]byte("xy")); err != ErrTooLarge {
		t.Errorf("over the limit: %v", err)
	}
	if err := w.FlushError(); err != nil || c.flushes != 0 || c.Code != http.StatusOK || c.Header().Get("Content-Length") != "99" {
		t.Errorf("a held body was flushed: %d", c.flushes)
	}
	w.WriteHeader(http.StatusBadGateway) // decided: no change
	if w.Status != http.StatusOK {
		t.Errorf("status %d", w.Status)
	}

	c = newClient()
	w, _ = newWriter(c, "text/event-stream")
	w.WriteHeader(http.StatusTooManyRequests)
	if _, err := w.Write([]byte("data: drop\n\n")); err != nil {
		t.Fatal(err)
	}
	if w.Mode != Pass || c.Code != http.StatusTooManyRequests || c.Body.String() != "data: drop\n\n" || c.Header().Get("Content-Length") != "99" {
		t.Errorf("pass: mode %d, client %d %q", w.Mode, c.Code, c.Body.String())
	}
	if err := w.FlushError(); err != nil || c.flushes != 1 {
		t.Errorf("pass flush: %v %d", err, c.flushes)
	}
}

func TestSendRecordsFailure(t *testing.T) {
	c := newClient()
	w, _ := newWriter(c, "text/event-stream")
	w.WriteHeader(http.StatusOK)
	c.fail = http.ErrHandlerTimeout
	if _, err := w.Write([]byte("data: pass\n\n")); err != http.ErrHandlerTimeout || w.SendErr != http.ErrHandlerTimeout {
		t.Errorf("Write %v, SendErr %v", err, w.SendErr)
	}
}

func TestInterim(t *testing.T) {
	for status, want := range map[int]bool{100: true, 103: true, 101: false, 199: true, 200: false, 204: false, 404: false} {
		if Interim(status) != want {
			t.Errorf("Interim(%d) = %v", status, !want)
		}
	}
}

func TestData(t *testing.T) {
	for ev, want := range map[string]string{
		"data: {\"a\":1}\n\n":           `{"a":1}`,
		"event: x\ndata:[DONE]\r\n\r\n": "[DONE]",
		": comment\n\n":                 "",
	} {
		if got := string(Data([]byte(ev))); got != want {
			t.Errorf("Data(%q) = %q, want %q", ev, got, want)
		}
	}
	if !IsDone([]byte("[DONE]")) || IsDone([]byte("DONE")) {
		t.Error("IsDone")
	}
}
