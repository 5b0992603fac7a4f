package audio

import (
	"encoding/base64"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/audiolen"
	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
)

// MaxAudioBytes is the largest audio file a transcription takes, as the
// public API bounds an upload.
const MaxAudioBytes = 25 << 20

// maxTranscript bounds the provider's answer the gateway reads.
const maxTranscript = 16 << 20

// transcriptFormats are the public response formats.
var transcriptFormats = []string{"json", "verbose_json"}

// Transcription is one checked speech to text request.
type Transcription struct {
	req   dialect.TranscriptionRequest
	bound billing.Usage
}

// NewTranscription checks a transcription request's fields (the JSON
// form; an upload was read into it, FormBody): input_audio, language,
// response_format, temperature, timestamp_granularities. The audio's
// length is measured from the file.
func NewTranscription(f *reqbody.Fields) (upstream.Service, *apierror.Error) {
	s := &Transcription{req: dialect.TranscriptionRequest{Temperature: -1}}
	in, ok := f.Get("input_audio")
	if !ok || !in.IsObject() {
		return nil, apierror.BadRequest("input_audio: required object with data and format")
	}
	data := in.Get("data")
	if data.Type != gjson.String || data.Str == "" {
		return nil, apierror.BadRequest("input_audio.data: required base64 string")
	}
	if base64.StdEncoding.DecodedLen(len(data.Str)) > MaxAudioBytes+2 {
		return nil, tooLarge("input_audio.data")
	}
	audio, err := base64.StdEncoding.DecodeString(data.Str)
	if err != nil {
		return nil, apierror.BadRequest("input_audio.data: not base64")
	}
	if len(audio) > MaxAudioBytes {
		return nil, tooLarge("input_audio.data")
	}
	if v := in.Get("format"); v.Type != gjson.String || v.Str == "" {
		return nil, apierror.BadRequest("input_audio.format: required string")
	}
	format, length, apiErr := measure(audio, "input_audio.data")
	if apiErr != nil {
		return nil, apiErr
	}
	s.req.Audio, s.req.Format = audio, string(format)
	if v, ok := f.Get("language"); ok && v.Type != gjson.Null {
		if v.Type != gjson.String {
			return nil, apierror.BadRequest("language: an ISO-639-1 code")
		}
		s.req.Language = strings.Clone(v.Str)
	}
	if v, ok := f.Get("response_format"); ok && v.Type != gjson.Null {
		if v.Type != gjson.String || !contains(transcriptFormats, v.Str) {
			return nil, apierror.BadRequest("response_format: one of " + strings.Join(transcriptFormats, ", "))
		}
		s.req.ResponseFormat = v.Str
	}
	if v, ok := f.Get("temperature"); ok && v.Type != gjson.Null {
		if v.Type != gjson.Number || v.Num < 0 || v.Num > 1 {
			return nil, apierror.BadRequest("temperature: a number from 0 to 1")
		}
		s.req.Temperature = v.Num
	}
	if v, ok := f.Get("timestamp_granularities"); ok && v.Type != gjson.Null {
		if !v.IsArray() {
			return nil, apierror.BadRequest("timestamp_granularities: an array of word, segment")
		}
		for _, g := range v.Array() {
			if g.Str != "word" && g.Str != "segment" {
				return nil, apierror.BadRequest("timestamp_granularities: an array of word, segment")
			}
			s.req.TimestampGranularities = append(s.req.TimestampGranularities, g.Str)
		}
	}
	if v, ok := f.Get("stream"); ok && v.Type == gjson.True {
		return nil, apierror.BadRequest("stream: this gateway's transcriptions are not streamed")
	}
	s.bound = billing.Usage{AudioSeconds: wholeSeconds(length)}
	return s, nil
}

// measure is the format and length of audio, named field in the 400 of
// a file that is not audio the gateway can measure.
func measure(audio []byte, field string) (audiolen.Format, time.Duration, *apierror.Error) {
	format, length, err := audiolen.Measure(audio)
	if err != nil {
		return "", 0, apierror.BadRequest(field + ": not audio the gateway can measure (WAV, MP3, FLAC or Ogg Vorbis or Opus): " + err.Error())
	}
	return format, length, nil
}

// tooLarge is the 413 of an audio file over MaxAudioBytes.
func tooLarge(field string) *apierror.Error {
	return apierror.New(http.StatusRequestEntityTooLarge, field+": the audio is larger than "+strconv.Itoa(MaxAudioBytes)+" bytes")
}

// wholeSeconds is d in seconds, a part of one counted whole.
func wholeSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// Transcribes reports whether m is a speech to text model: priced per
// second of audio.
func Transcribes(m *catalog.Model) bool { return m != nil && m.Pricing.AudioSecond > 0 }

// Name implements upstream.Service.
func (s *Transcription) Name() string { return "transcription" }

// Check implements upstream.Service: the model must be priced per second
// of audio and its provider have a transcription API.
func (s *Transcription) Check(a upstream.Attempt) *apierror.Error {
	if _, ok := a.Provider.D().(dialect.Transcriber); !ok || !Transcribes(a.Model) {
		return apierror.BadRequest("model: not a speech to text model")
	}
	return nil
}

// URI implements upstream.Service.
func (s *Transcription) URI(d dialect.Dialect) string {
	return d.(dialect.Transcriber).TranscriptionsURI()
}

// Body implements upstream.Service.
func (s *Transcription) Body(d dialect.Dialect, model string) ([]byte, error) {
	b, _, err := s.TypedBody(d, model)
	return b, err
}

// TypedBody implements upstream.TypedBody: the provider's multipart
// upload.
func (s *Transcription) TypedBody(d dialect.Dialect, model string) ([]byte, string, error) {
	req := s.req
	req.Model = model
	return d.(dialect.Transcriber).TranscriptionsBody(req)
}

// Bound implements upstream.Service: the seconds of the audio.
func (s *Transcription) Bound() billing.Usage { return s.bound }

// Answer implements upstream.Service.
func (s *Transcription) Answer(w http.ResponseWriter, route *upstream.Route, genID string) upstream.ServiceAnswer {
	return upstream.NewWholeAnswer(w, s, route, genID, maxTranscript)
}

// ReadAnswer implements upstream.WholeReader.
func (s *Transcription) ReadAnswer(route *upstream.Route, _ string, body []byte) ([]byte, billing.Usage, error) {
	ta, err := route.Dialect.(dialect.Transcriber).TranscriptionsAnswer(body)
	if err != nil {
		return nil, billing.Usage{}, err
	}
	out, used := s.public(ta)
	return out, used, nil
}

// FailureBody implements upstream.WholeReader.
func (s *Transcription) FailureBody(err error) []byte {
	return []byte(`{"error":{"message":` + string(jsonstr.Quote("Provider returned a transcription the gateway cannot read: "+err.Error())) + `}}`)
}

// public is the public answer of ta and its usage, the seconds the
// provider reported (at most the measured length; not reported: the
// measured length), which is what is charged.
func (s *Transcription) public(ta dialect.TranscriptionAnswer) ([]byte, billing.Usage) {
	usage := s.bound
	if ta.Seconds >= 0 {
		usage.AudioSeconds = min(int64(math.Ceil(ta.Seconds)), s.bound.AudioSeconds)
	}
	out := make([]byte, 0, len(ta.Text)+len(ta.Verbose)+64)
	out = append(out, `{"text":`...)
	out = append(out, jsonstr.Quote(ta.Text)...)
	if ta.Verbose != "" {
		out = append(out, ',')
		out = append(out, ta.Verbose...)
	}
	out = append(out, `,"usage":{"seconds":`...)
	out = strconv.AppendInt(out, usage.AudioSeconds, 10)
	return append(out, "}}"...), usage
}

// Interface guards
var (
	_ upstream.Service     = (*Transcription)(nil)
	_ upstream.TypedBody   = (*Transcription)(nil)
	_ upstream.WholeReader = (*Transcription)(nil)
)
