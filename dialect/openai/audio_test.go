package openai

import (
	"bytes"
	"errors"
	"mime"
	"mime/multipart"
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
)

func TestSpeechBody(t *testing.T) {
	d := newDialect(dialect.Options{})
	got, err := d.SpeechBody(dialect.SpeechRequest{Model: "tts-1", Input: "Hello", Voice: "nova", ResponseFormat: "mp3", Speed: 1.5})
	if want := `{"model":"tts-1","input":"Hello","voice":"nova","response_format":"mp3","speed":1.5}`; err != nil || string(got) != want {
		t.Fatalf("speech body %s, %v", got, err)
	}
	got, err = d.SpeechBody(dialect.SpeechRequest{Model: "tts-1", Input: "Hi"})
	if want := `{"model":"tts-1","input":"Hi","voice":"alloy","response_format":"pcm"}`; err != nil || string(got) != want {
		t.Fatalf("defaults %s, %v", got, err)
	}
	for field, req := range map[string]dialect.SpeechRequest{
		"voice": {Model: "tts-1", Input: "x", Voice: "en_paul_neutral"},
		"speed": {Model: "tts-1", Input: "x", Speed: 5},
		"input": {Model: "tts-1", Input: strings.Repeat("é", maxSpeechInput+1)},
	} {
		_, err := d.SpeechBody(req)
		if fe, ok := errors.AsType[*dialect.FieldError](err); !ok || fe.Field != field {
			t.Errorf("%s: %v", field, err)
		}
	}
}

func TestTranscriptionsBody(t *testing.T) {
	d := newDialect(dialect.Options{})
	body, ct, err := d.TranscriptionsBody(dialect.TranscriptionRequest{Model: "whisper-1", Audio: []byte("RIFF...."), Format: "wav",
		Language: "en", ResponseFormat: "verbose_json", TimestampGranularities: []string{"word"}, Temperature: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, params, err := mime.ParseMediaType(ct)
	if err != nil {
		t.Fatal(err)
	}
	form, err := multipart.NewReader(bytes.NewReader(body), params["boundary"]).ReadForm(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if form.Value["model"][0] != "whisper-1" || form.Value["language"][0] != "en" || form.Value["timestamp_granularities[]"][0] != "word" ||
		form.Value["temperature"] != nil || form.File["file"][0].Filename != "audio.wav" || form.File["file"][0].Size != 8 {
		t.Fatalf("form %+v", form)
	}
}

func TestTranscriptionsAnswer(t *testing.T) {
	d := newDialect(dialect.Options{})
	a, err := d.TranscriptionsAnswer([]byte(`{"text":"hi","usage":{"type":"duration","seconds":3}}`))
	if err != nil || a.Text != "hi" || a.Seconds != 3 || a.Verbose != "" {
		t.Fatalf("%+v, %v", a, err)
	}
	a, err = d.TranscriptionsAnswer([]byte(`{"task":"transcribe","language":"english","duration":2.5,"text":"hi","segments":[]}`))
	if err != nil || a.Seconds != 2.5 || a.Verbose != `"task":"transcribe","language":"english","duration":2.5,"segments":[]` {
		t.Fatalf("verbose %+v, %v", a, err)
	}
	if _, err := d.TranscriptionsAnswer([]byte(`{"error":{}}`)); err == nil {
		t.Fatal("an answer without text is read")
	}
}
