// Package sse is the one stream-rewriting core that the gateway's answer
// writers share (the meter's, the Responses<->Chat translation's and the
// citation writer's): a response writer that, once the final status is
// known, either passes the body, holds it whole for its owner, or splits a
// server-sent event stream into events and hands each to its owner's hook,
// which passes, rewrites, holds back or drops it. Nothing is buffered
// beyond the event being read, and flushes pass for what is sent.
package sse

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// Mode is what the writer does with the body.
type Mode int

const (
	Undecided Mode = iota // no final status yet
	Stream                // event by event through the hook
	Hold                  // buffered whole; the owner sends it
	Pass                  // unchanged, as it comes
)

// Hooks is what a writer's owner decides.
type Hooks interface {
	// Decide picks the mode for the final status; it may edit the
	// header, which is sent right after for Stream and Pass.
	Decide(status int) Mode
	// Event handles one complete event (its blank line included) and
	// returns what the client gets in its place: ev itself to pass it,
	// other bytes to rewrite it (any number of events), nil to drop or
	// hold it back. ev and out are sent before an error, which ends the
	// Write. ev is reused once Event returns: a hook that holds an event
	// keeps a copy.
	Event(ev []byte) ([]byte, error)
}

// ErrTooLarge is a held body's Write beyond the Writer's Limit.
var ErrTooLarge = errors.New("upstream answer is too large")

// Writer is the core. An owner embeds it, sets it up with Init and
// implements Hooks; interim (1xx) responses never change its state.
type Writer struct {
	caddyhttp.ResponseWriterWrapper
	Mode   Mode
	Status int          // the final status
	Body   bytes.Buffer // Hold: the body; Stream: the event being read
	Limit  int          // Hold: the largest body taken; 0: no bound
	// SendErr is the first failed write to the client; the client has
	// most likely gone.
	SendErr error

	hooks Hooks
}

// Init sets the writer up over w, with its owner's hooks.
func (sw *Writer) Init(w http.ResponseWriter, hooks Hooks) {
	sw.ResponseWriter = w
	sw.hooks = hooks
}

// TranslateMode is Decide for a writer that turns a provider's answer
// into another API's: an error status passes as it is (the meter's
// fallback and error rules read it), a stream is converted event by
// event, any other answer is held whole for FinishHeld. The converted body
// has another length; the meter sets it.
func (sw *Writer) TranslateMode(status int) Mode {
	sw.Header().Del("Content-Length")
	switch {
	case status >= 400:
		return Pass
	case strings.HasPrefix(sw.Header().Get("Content-Type"), "text/event-stream"):
		return Stream
	}
	return Hold
}

// FinishHeld sends a held answer once the provider's is complete:
// converted by convert, or unchanged when convert cannot (a body that is
// not the expected object, which the meter then reports as invalid). It
// does nothing in another mode.
func (sw *Writer) FinishHeld(convert func(body []byte) ([]byte, bool)) {
	if sw.Mode != Hold {
		return
	}
	body := sw.Body.Bytes()
	if out, ok := convert(body); ok {
		body = out
	}
	sw.ResponseWriter.WriteHeader(sw.Status)
	_ = sw.Send(body) // the status is sent: a failed write is a client gone
}

// Interim reports whether status is an informational response that a
// final one follows (1xx but 101). reverse_proxy passes a provider's
// interim responses on (its 100 Continue to a forwarded
// Expect: 100-continue, 103 Early Hints); they are not the answer, and
// net/http already sent the client its own 100 Continue when the gateway
// read the body, so the writers that meter or rewrite answers drop them.
func Interim(status int) bool {
	return status >= 100 && status < 200 && status != http.StatusSwitchingProtocols
}

// WriteHeader fixes the mode at the final status; Stream and Pass send
// the header now (a rewritten stream without Content-Length).
func (sw *Writer) WriteHeader(status int) {
	if sw.Mode != Undecided || Interim(status) {
		return
	}
	sw.Status = status
	sw.Mode = sw.hooks.Decide(status)
	switch sw.Mode {
	case Stream:
		sw.Header().Del("Content-Length")
	case Hold:
		return
	}
	sw.ResponseWriter.WriteHeader(status)
}

// Write implements io.Writer.
func (sw *Writer) Write(p []byte) (int, error) {
	if sw.Mode == Undecided {
		sw.WriteHeader(http.StatusOK)
	}
	switch sw.Mode {
	case Pass:
		return sw.ResponseWriter.Write(p)
	case Hold:
		if sw.Limit > 0 && sw.Body.Len()+len(p) > sw.Limit {
			return 0, ErrTooLarge
		}
		return sw.Body.Write(p)
	}
	sw.Body.Write(p)
	for {
		ev, rest, ok := CutEvent(sw.Body.Bytes())
		if !ok {
			break
		}
		// out may be ev itself, in the buffer: it is sent before the
		// remainder moves to the buffer's start over it.
		out, err := sw.hooks.Event(ev)
		if len(out) > 0 {
			if serr := sw.Send(out); err == nil {
				err = serr
			}
		}
		if err != nil {
			return 0, err
		}
		n := copy(sw.Body.Bytes(), rest)
		sw.Body.Truncate(n)
	}
	return len(p), nil
}

// Send writes b to the client, recording a failure in SendErr.
func (sw *Writer) Send(b []byte) error {
	_, err := sw.ResponseWriter.Write(b)
	if err != nil && sw.SendErr == nil {
		sw.SendErr = err
	}
	return err
}

// Flush flushes the client's connection.
func (sw *Writer) Flush() error {
	return http.NewResponseController(sw.ResponseWriter).Flush()
}

// ReadFrom makes sure every byte goes through Write (the embedded wrapper
// would hand the reader straight to the client's connection).
func (sw *Writer) ReadFrom(r io.Reader) (int64, error) {
	return io.Copy(writerOnly{sw}, r)
}

type writerOnly struct{ io.Writer }

// FlushError passes flushes through for what is sent as it comes; a held
// body is not sent before it is complete.
func (sw *Writer) FlushError() error {
	if sw.Mode != Stream && sw.Mode != Pass {
		return nil
	}
	return sw.Flush()
}

// CutEvent splits off the first complete event of b (ending in a blank
// line, with LF or CRLF line ends).
func CutEvent(b []byte) (ev, rest []byte, ok bool) {
	i, n := bytes.Index(b, []byte("\n\n")), 2
	if j := bytes.Index(b, []byte("\r\n\r\n")); j >= 0 && (i < 0 || j < i) {
		i, n = j, 4
	}
	if i < 0 {
		return nil, b, false
	}
	return b[:i+n], b[i+n:], true
}

// Data returns the payload of an event's first data line; nil when it has
// none (a comment, a keep-alive).
func Data(ev []byte) []byte {
	for len(ev) > 0 {
		line := ev
		if i := bytes.IndexByte(ev, '\n'); i >= 0 {
			line, ev = ev[:i], ev[i+1:]
		} else {
			ev = nil
		}
		if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			return bytes.TrimSpace(d)
		}
	}
	return nil
}

// IsDone reports whether data is the stream's closing [DONE].
func IsDone(data []byte) bool { return bytes.Equal(data, []byte("[DONE]")) }

// ReplaceData returns ev with its data payload old replaced by new.
func ReplaceData(ev, old, new []byte) []byte {
	i := bytes.Index(ev, old)
	if i < 0 {
		return ev
	}
	out := make([]byte, 0, len(ev)-len(old)+len(new))
	out = append(out, ev[:i]...)
	out = append(out, new...)
	return append(out, ev[i+len(old):]...)
}
