// Package audio is the services of the audio routes: POST /audio/speech
// (text to speech, dialect.Speaker), whose audio passes to the client as
// it comes, charged per character of the text, and POST
// /audio/transcriptions (speech to text, dialect.Transcriber), charged
// per second of the audio, measured from the file.
package audio

import (
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/sse"
)

// speechFormats are the public response formats.
var speechFormats = []string{"mp3", "pcm"}

// Speech is one checked text to speech request.
type Speech struct {
	req   dialect.SpeechRequest
	bound billing.Usage
}

// NewSpeech checks a speech request's fields: input, voice,
// response_format, speed.
func NewSpeech(f *reqbody.Fields) (upstream.Service, *apierror.Error) {
	s := &Speech{}
	in, ok := f.Get("input")
	switch {
	case !ok || in.Type != gjson.String:
		return nil, apierror.BadRequest("input: required string")
	case strings.TrimSpace(in.Str) == "":
		return nil, apierror.BadRequest("input: must not be empty")
	}
	s.req.Input = strings.Clone(in.Str)
	if v, ok := f.Get("voice"); ok && v.Type != gjson.Null {
		if v.Type != gjson.String || v.Str == "" {
			return nil, apierror.BadRequest("voice: a non-empty string")
		}
		s.req.Voice = strings.Clone(v.Str)
	}
	if v, ok := f.Get("response_format"); ok && v.Type != gjson.Null {
		if v.Type != gjson.String || !contains(speechFormats, v.Str) {
			return nil, apierror.BadRequest("response_format: one of " + strings.Join(speechFormats, ", "))
		}
		s.req.ResponseFormat = v.Str
	}
	if v, ok := f.Get("speed"); ok && v.Type != gjson.Null {
		if v.Type != gjson.Number || v.Num <= 0 {
			return nil, apierror.BadRequest("speed: a positive number")
		}
		s.req.Speed = v.Num
	}
	if v, ok := f.Get("input_references"); ok && v.Type != gjson.Null {
		return nil, apierror.BadRequest("input_references: voice cloning is not offered by this gateway's speech providers")
	}
	if v, ok := f.Get("stream"); ok && v.Type == gjson.True {
		return nil, apierror.BadRequest("stream: the audio is streamed as it comes; this route takes no stream field")
	}
	s.bound = billing.Usage{Characters: int64(utf8.RuneCountInString(s.req.Input))}
	return s, nil
}

func contains(values []string, v string) bool {
	for _, x := range values {
		if x == v {
			return true
		}
	}
	return false
}

// SpeaksText reports whether m is a text to speech model: priced per
// character, or listing audio among its output modalities.
func SpeaksText(m *catalog.Model) bool {
	return m != nil && (m.Pricing.Character > 0 || m.Outputs("audio"))
}

// Name implements upstream.Service.
func (s *Speech) Name() string { return "text to speech" }

// Check implements upstream.Service: the model must speak (priced per
// character, or listing audio output), its provider have a speech API,
// and its model offer the voice, format, speed and length asked for.
func (s *Speech) Check(a upstream.Attempt) *apierror.Error {
	d := a.Provider.D()
	if _, ok := d.(dialect.Speaker); !ok || !SpeaksText(a.Model) {
		return apierror.BadRequest("model: not a text to speech model")
	}
	if _, err := s.Body(d, a.ModelFor()); err != nil {
		return upstream.BodyRefusal(err)
	}
	return nil
}

// URI implements upstream.Service.
func (s *Speech) URI(d dialect.Dialect) string { return d.(dialect.Speaker).SpeechURI() }

// Body implements upstream.Service.
func (s *Speech) Body(d dialect.Dialect, model string) ([]byte, error) {
	req := s.req
	req.Model = model
	return d.(dialect.Speaker).SpeechBody(req)
}

// Bound implements upstream.Service: the characters of the input.
func (s *Speech) Bound() billing.Usage { return s.bound }

// Passes implements upstream.Passer: the audio is not held.
func (s *Speech) Passes() bool { return true }

// Answer implements upstream.Service.
func (s *Speech) Answer(w http.ResponseWriter, _ *upstream.Route, _ string) upstream.ServiceAnswer {
	a := &speechAnswer{s: s}
	a.Init(w, a)
	return a
}

// speechAnswer passes the provider's audio to the client, each write
// flushed, so that the audio plays as it is spoken.
type speechAnswer struct {
	sse.Writer
	s *Speech
	// audio is the bytes of audio the provider sent.
	audio int64
}

// Decide implements sse.Hooks: everything passes to the meter's writer,
// which holds an error status and passes the audio.
func (a *speechAnswer) Decide(int) sse.Mode { return sse.Pass }

// Event implements sse.Hooks: never called (no event stream).
func (a *speechAnswer) Event(ev []byte) ([]byte, error) { return ev, nil }

// Write implements io.Writer: the audio is flushed as it comes.
func (a *speechAnswer) Write(p []byte) (int, error) {
	n, err := a.Writer.Write(p)
	if a.Status < 400 {
		a.audio += int64(n)
		if err == nil {
			err = a.Flush()
		}
	}
	return n, err
}

// Finish implements upstream.ServiceAnswer: the audio was sent as it
// came.
func (a *speechAnswer) Finish() {}

// Usage implements upstream.ServiceAnswer: the input's characters once
// the provider sent audio (spoken: a provider charges the request, even
// cut short), nothing before.
func (a *speechAnswer) Usage() (billing.Usage, bool) {
	if a.Status >= 400 || a.audio == 0 {
		return billing.Usage{}, false
	}
	return a.s.bound, true
}

// Interface guards
var (
	_ upstream.Service       = (*Speech)(nil)
	_ upstream.Passer        = (*Speech)(nil)
	_ upstream.ServiceAnswer = (*speechAnswer)(nil)
)
