package mockprovider

import (
	"encoding/binary"
	"fmt"
	"math"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// OpenAI's audio API, always strict, as OpenAI's own refuses what it
// does not define:
//
//   - POST /audio/speech: model, input and voice are required, voice one
//     of OpenAI's, response_format one of its formats, speed 0.25 to 4,
//     input at most 4096 characters; any other member is a 400 (Unknown
//     parameter). The answer is audio (128 bytes per character of input)
//     in 8 chunks, each flushed, ChunkDelay apart; the model name's
//     speech-stall sends the first chunk and then waits for the client
//     to leave.
//   - POST /audio/transcriptions: a multipart form with file and model;
//     any other part than OpenAI's is a 400. The answer is
//     {"text", "usage": {"type": "duration", "seconds"}} (seconds from a
//     WAV file's header, else none), verbose_json adds task, language,
//     duration and segments.
//
// The model name's faults apply: error-500 and the others.

// openAISpeechMembers are the members a speech request may have.
var openAISpeechMembers = []string{"model", "input", "voice", "instructions", "response_format", "speed", "stream_format"}

// openAIVoices are the voices OpenAI's speech models offer.
var openAIVoices = []string{"alloy", "ash", "ballad", "cedar", "coral", "echo", "fable", "marin", "nova", "onyx", "sage", "shimmer", "verse"}

// openAISpeechFormats are the audio formats OpenAI's speech models answer.
var openAISpeechFormats = map[string]string{"mp3": "audio/mpeg", "opus": "audio/opus", "aac": "audio/aac", "flac": "audio/flac", "wav": "audio/wav", "pcm": "audio/pcm"}

// mockSpeechBytesPerChar is the audio the mock speaks per character.
const mockSpeechBytesPerChar = 128

func (m *Handler) serveOpenAISpeech(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		writeMethodNotAllowed(w, http.MethodPost)
		return nil
	}
	body, apiErr := readMockBody(w, r)
	if apiErr != nil {
		writeError(w, apiErr)
		return nil
	}
	req := gjson.ParseBytes(body)
	if msg, param := checkOpenAISpeech(req); msg != "" {
		writeOpenAIBadRequest(w, msg, param)
		return nil
	}
	model := req.Get("model").Str
	if writeInjectedError(w, model) {
		return nil
	}
	format := req.Get("response_format").Str
	if format == "" {
		format = "mp3"
	}
	w.Header().Set("Content-Type", openAISpeechFormats[format])
	w.WriteHeader(http.StatusOK)
	n := utf8.RuneCountInString(req.Get("input").Str) * mockSpeechBytesPerChar
	chunk := make([]byte, (n+7)/8)
	rc := http.NewResponseController(w)
	for i := 0; n > 0; i++ {
		c := chunk[:min(len(chunk), n)]
		for j := range c {
			c[j] = byte(i)
		}
		if _, err := w.Write(c); err != nil {
			return nil
		}
		_ = rc.Flush()
		n -= len(c)
		if i == 0 && strings.Contains(model, "speech-stall") {
			<-r.Context().Done()
			return nil
		}
		if d := time.Duration(m.ChunkDelay); d > 0 && n > 0 {
			time.Sleep(d)
		}
	}
	return nil
}

// checkOpenAISpeech is the 400's message and parameter of a speech request
// OpenAI's audio API refuses; "" when it takes it.
func checkOpenAISpeech(req gjson.Result) (msg, param string) {
	req.ForEach(func(k, _ gjson.Result) bool {
		if !slices.Contains(openAISpeechMembers, k.Str) {
			msg, param = fmt.Sprintf("Unknown parameter: '%s'.", k.Str), k.Str
		}
		return msg == ""
	})
	if msg != "" {
		return msg, param
	}
	for _, name := range []string{"model", "input", "voice"} {
		if v := req.Get(name); v.Type != gjson.String || v.Str == "" {
			return fmt.Sprintf("Missing required parameter: '%s'.", name), name
		}
	}
	if v := req.Get("voice").Str; !slices.Contains(openAIVoices, v) {
		return fmt.Sprintf("Invalid value: '%s'. Supported values are: '%s'.", v, strings.Join(openAIVoices, "', '")), "voice"
	}
	if f := req.Get("response_format"); f.Exists() && openAISpeechFormats[f.Str] == "" {
		return fmt.Sprintf("Invalid value: '%s'. Supported values are: 'mp3', 'opus', 'aac', 'flac', 'wav', and 'pcm'.", f.Str), "response_format"
	}
	if s := req.Get("speed"); s.Exists() && (s.Type != gjson.Number || s.Num < 0.25 || s.Num > 4) {
		return "Invalid 'speed': decimal must be between 0.25 and 4.", "speed"
	}
	if n := utf8.RuneCountInString(req.Get("input").Str); n > 4096 {
		return fmt.Sprintf("Invalid 'input': string too long. Expected a string with maximum length 4096, but got a string with length %d instead.", n), "input"
	}
	return "", ""
}

// openAITranscriptionParts are the parts a transcription form may have.
var openAITranscriptionParts = []string{"file", "model", "language", "prompt", "response_format", "temperature",
	"timestamp_granularities[]", "include[]", "chunking_strategy", "stream"}

func (m *Handler) serveOpenAITranscriptions(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		writeMethodNotAllowed(w, http.MethodPost)
		return nil
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "multipart/form-data" {
		writeOpenAIBadRequest(w, "Invalid Content-Type header ("+r.Header.Get("Content-Type")+"), expected multipart/form-data.", "")
		return nil
	}
	r.Body = http.MaxBytesReader(w, r.Body, mockMaxBody)
	if err := r.ParseMultipartForm(mockMaxBody); err != nil {
		writeOpenAIBadRequest(w, "Could not parse multipart form: "+err.Error(), "")
		return nil
	}
	form := r.MultipartForm
	for name := range form.Value {
		if !slices.Contains(openAITranscriptionParts, name) {
			writeOpenAIBadRequest(w, fmt.Sprintf("Unknown parameter: '%s'.", name), name)
			return nil
		}
	}
	for name := range form.File {
		if name != "file" {
			writeOpenAIBadRequest(w, fmt.Sprintf("Unknown parameter: '%s'.", name), name)
			return nil
		}
	}
	value := func(name string) string {
		if v := form.Value[name]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	model := value("model")
	if model == "" {
		writeOpenAIBadRequest(w, "Missing required parameter: 'model'.", "model")
		return nil
	}
	if len(form.File["file"]) != 1 {
		writeOpenAIBadRequest(w, "Missing required parameter: 'file'.", "file")
		return nil
	}
	format := value("response_format")
	if format != "" && format != "json" && format != "verbose_json" && format != "text" && format != "srt" && format != "vtt" {
		writeOpenAIBadRequest(w, fmt.Sprintf("Invalid value: '%s'. Supported values are: 'json', 'text', 'srt', 'verbose_json', and 'vtt'.", format), "response_format")
		return nil
	}
	if writeInjectedError(w, model) {
		return nil
	}
	fh := form.File["file"][0]
	f, err := fh.Open()
	if err != nil {
		writeOpenAIBadRequest(w, "Could not read file: "+err.Error(), "file")
		return nil
	}
	head := make([]byte, 64)
	n, _ := f.Read(head)
	_ = f.Close()
	seconds, ok := wavSeconds(head[:n], fh.Size)
	text := fmt.Sprintf("Transcript of %s (%d bytes).", fh.Filename, fh.Size)
	out := map[string]any{"text": text}
	if ok {
		out["usage"] = map[string]any{"type": "duration", "seconds": math.Ceil(seconds)}
	}
	if format == "verbose_json" {
		out["task"], out["language"], out["duration"] = "transcribe", "english", seconds
		out["segments"] = []any{map[string]any{"id": 0, "seek": 0, "start": 0, "end": seconds, "text": text, "tokens": []int{1},
			"temperature": 0, "avg_logprob": -0.2, "compression_ratio": 1, "no_speech_prob": 0.01}}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// wavSeconds is the duration of a canonical WAV file of size bytes whose
// first bytes are head.
func wavSeconds(head []byte, size int64) (float64, bool) {
	if len(head) < 44 || string(head[0:4]) != "RIFF" || string(head[8:12]) != "WAVE" {
		return 0, false
	}
	rate := binary.LittleEndian.Uint32(head[28:32])
	if rate == 0 {
		return 0, false
	}
	return float64(size-44) / float64(rate), true
}

// writeOpenAIBadRequest is OpenAI's 400 of an invalid request.
func writeOpenAIBadRequest(w http.ResponseWriter, msg, param string) {
	var e openAIError
	e.Error.Message, e.Error.Type, e.Error.Code = msg, "invalid_request_error", param
	writeJSON(w, http.StatusBadRequest, e)
}
