package mockprovider

import (
	"bytes"
	"encoding/binary"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func openAIAudio(t *testing.T, path, contentType string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/v1/audio/"+path, bytes.NewReader(body))
	r.Header.Set("Content-Type", contentType)
	w := httptest.NewRecorder()
	if err := new(Handler).ServeHTTP(w, r, nil); err != nil {
		t.Fatal(err)
	}
	return w
}

func TestOpenAISpeech(t *testing.T) {
	w := openAIAudio(t, "speech", "application/json", []byte(`{"model":"tts-1","input":"Hello","voice":"nova","response_format":"pcm"}`))
	if w.Code != 200 || w.Body.Len() != 5*mockSpeechBytesPerChar || w.Header().Get("Content-Type") != "audio/pcm" {
		t.Fatalf("%d %s %d", w.Code, w.Header(), w.Body.Len())
	}
}

// The double refuses what OpenAI's speech API refuses.
func TestOpenAISpeechStrict(t *testing.T) {
	for body, param := range map[string]string{
		`{"model":"tts-1","input":"hi"}`:                                                "voice",
		`{"model":"tts-1","input":"hi","voice":"en_paul_neutral"}`:                      "voice",
		`{"model":"tts-1","input":"hi","voice":"alloy","speed":5}`:                      "speed",
		`{"model":"tts-1","input":"hi","voice":"alloy","response_format":"x"}`:          "response_format",
		`{"model":"tts-1","input":"hi","voice":"alloy","seed":1}`:                       "seed",
		`{"model":"tts-1","voice":"alloy"}`:                                             "input",
		`{"model":"tts-1","input":"` + strings.Repeat("a", 4097) + `","voice":"alloy"}`: "input",
	} {
		w := openAIAudio(t, "speech", "application/json", []byte(body))
		if w.Code != 400 || gjson.Get(w.Body.String(), "error.code").Str != param {
			t.Errorf("%.80s: %d %s", body, w.Code, w.Body)
		}
	}
}

// testWAV is a canonical 16-bit mono WAV of seconds at 8000 Hz.
func testWAV(seconds int) []byte {
	data := 16000 * seconds
	b := make([]byte, 44+data)
	copy(b, "RIFF")
	binary.LittleEndian.PutUint32(b[4:], uint32(36+data))
	copy(b[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(b[16:], 16)
	binary.LittleEndian.PutUint16(b[20:], 1)
	binary.LittleEndian.PutUint16(b[22:], 1)
	binary.LittleEndian.PutUint32(b[24:], 8000)
	binary.LittleEndian.PutUint32(b[28:], 16000)
	binary.LittleEndian.PutUint16(b[32:], 2)
	binary.LittleEndian.PutUint16(b[34:], 16)
	copy(b[36:], "data")
	binary.LittleEndian.PutUint32(b[40:], uint32(data))
	return b
}

func transcriptionForm(t *testing.T, file []byte, fields ...string) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if file != nil {
		fw, _ := mw.CreateFormFile("file", "a.wav")
		_, _ = fw.Write(file)
	}
	for i := 0; i+1 < len(fields); i += 2 {
		_ = mw.WriteField(fields[i], fields[i+1])
	}
	_ = mw.Close()
	return buf.Bytes(), mw.FormDataContentType()
}

func TestOpenAITranscriptions(t *testing.T) {
	body, ct := transcriptionForm(t, testWAV(3), "model", "whisper-1", "response_format", "verbose_json")
	w := openAIAudio(t, "transcriptions", ct, body)
	j := gjson.Parse(w.Body.String())
	if w.Code != 200 || j.Get("text").Str == "" || j.Get("usage.seconds").Num != 3 || j.Get("duration").Num != 3 || j.Get("segments.#").Int() != 1 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	for param, fields := range map[string][]string{
		"file":  {"model", "whisper-1"},
		"model": {"language", "en"},
		"voice": {"model", "whisper-1", "voice", "x"},
	} {
		var file []byte
		if param != "file" {
			file = testWAV(1)
		}
		body, ct := transcriptionForm(t, file, fields...)
		w := openAIAudio(t, "transcriptions", ct, body)
		if w.Code != 400 || gjson.Get(w.Body.String(), "error.code").Str != param {
			t.Errorf("%s: %d %s", param, w.Code, w.Body)
		}
	}
	if w := openAIAudio(t, "transcriptions", "application/json", []byte(`{"model":"whisper-1"}`)); w.Code != 400 {
		t.Errorf("json: %d %s", w.Code, w.Body)
	}
}
