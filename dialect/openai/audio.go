package openai

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"mime/multipart"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
)

// speechVoices are the voices OpenAI's text to speech models offer.
var speechVoices = []string{"alloy", "ash", "ballad", "cedar", "coral", "echo", "fable", "marin", "nova", "onyx", "sage", "shimmer", "verse"}

const (
	// defaultVoice is sent when the client names none: OpenAI's API
	// requires one.
	defaultVoice = "alloy"
	// maxSpeechInput is the most characters OpenAI speaks in one request.
	maxSpeechInput = 4096
)

// SpeechURI implements dialect.Speaker.
func (d *Dialect) SpeechURI() string { return "/audio/speech" }

// SpeechBody implements dialect.Speaker: the public default format, pcm,
// is sent (OpenAI's own default is mp3).
func (d *Dialect) SpeechBody(req dialect.SpeechRequest) ([]byte, error) {
	if n := utf8.RuneCountInString(req.Input); n > maxSpeechInput {
		return nil, &dialect.FieldError{Field: "input", Message: "at most " + strconv.Itoa(maxSpeechInput) + " characters for model " + req.Model}
	}
	voice := req.Voice
	if voice == "" {
		voice = defaultVoice
	}
	if !slices.Contains(speechVoices, voice) {
		return nil, &dialect.FieldError{Field: "voice", Message: "model " + req.Model + " offers " + strings.Join(speechVoices, ", ")}
	}
	if req.Speed != 0 && (req.Speed < 0.25 || req.Speed > 4) {
		return nil, &dialect.FieldError{Field: "speed", Message: "from 0.25 to 4 for model " + req.Model}
	}
	format := req.ResponseFormat
	if format == "" {
		format = "pcm"
	}
	b := make([]byte, 0, len(req.Input)+len(req.Model)+96)
	b = append(b, `{"model":`...)
	b = append(b, jsonstr.Quote(req.Model)...)
	b = append(b, `,"input":`...)
	b = append(b, jsonstr.Quote(req.Input)...)
	b = append(b, `,"voice":`...)
	b = append(b, jsonstr.Quote(voice)...)
	b = append(b, `,"response_format":`...)
	b = append(b, jsonstr.Quote(format)...)
	if req.Speed != 0 {
		b = append(b, `,"speed":`...)
		b = strconv.AppendFloat(b, req.Speed, 'g', -1, 64)
	}
	return append(b, '}'), nil
}

// TranscriptionsURI implements dialect.Transcriber.
func (d *Dialect) TranscriptionsURI() string { return "/audio/transcriptions" }

// TranscriptionsBody implements dialect.Transcriber: OpenAI's multipart
// form, the file named by its format.
func (d *Dialect) TranscriptionsBody(req dialect.TranscriptionRequest) ([]byte, string, error) {
	return transcriptionForm(req)
}

// transcriptionForm is the multipart form of req, with a boundary drawn
// for it.
func transcriptionForm(req dialect.TranscriptionRequest) ([]byte, string, error) {
	var buf bytes.Buffer
	buf.Grow(len(req.Audio) + 1024)
	mw := multipart.NewWriter(&buf)
	var rnd [16]byte
	_, _ = rand.Read(rnd[:]) // never fails
	if err := mw.SetBoundary("tollgate-" + hex.EncodeToString(rnd[:])); err != nil {
		return nil, "", err
	}
	h := make(textproto.MIMEHeader, 2)
	h.Set("Content-Disposition", `form-data; name="file"; filename="audio.`+req.Format+`"`)
	h.Set("Content-Type", "audio/"+req.Format)
	fw, err := mw.CreatePart(h)
	if err == nil {
		_, err = fw.Write(req.Audio)
	}
	field := func(name, value string) {
		if err == nil && value != "" {
			err = mw.WriteField(name, value)
		}
	}
	field("model", req.Model)
	field("language", req.Language)
	field("response_format", req.ResponseFormat)
	if req.Temperature >= 0 {
		field("temperature", strconv.FormatFloat(req.Temperature, 'g', -1, 64))
	}
	for _, g := range req.TimestampGranularities {
		field("timestamp_granularities[]", g)
	}
	if err == nil {
		err = mw.Close()
	}
	if err != nil {
		return nil, "", err
	}
	return buf.Bytes(), mw.FormDataContentType(), nil
}

// errTranscript is an answer without its text.
var errTranscript = errors.New("transcription answer without text")

// TranscriptionsAnswer implements dialect.Transcriber: the duration is
// usage.seconds (a model billed by duration), else verbose_json's
// duration.
func (d *Dialect) TranscriptionsAnswer(body []byte) (dialect.TranscriptionAnswer, error) {
	doc := gjson.ParseBytes(body)
	text := doc.Get("text")
	a := dialect.TranscriptionAnswer{Seconds: -1}
	if text.Type != gjson.String {
		return a, errTranscript
	}
	a.Text = text.Str
	if s := doc.Get("usage.seconds"); s.Type == gjson.Number && s.Num >= 0 {
		a.Seconds = s.Num
	} else if s := doc.Get("duration"); s.Type == gjson.Number && s.Num >= 0 {
		a.Seconds = s.Num
	}
	var verbose []byte
	doc.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "task", "language", "duration", "segments", "words":
			if len(verbose) > 0 {
				verbose = append(verbose, ',')
			}
			verbose = append(verbose, jsonstr.Quote(k.Str)...)
			verbose = append(verbose, ':')
			verbose = append(verbose, v.Raw...)
		}
		return true
	})
	a.Verbose = string(verbose)
	return a, nil
}

var (
	_ dialect.Speaker     = (*Dialect)(nil)
	_ dialect.Transcriber = (*Dialect)(nil)
)
