package audio

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"mime/multipart"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func wav(ms int) []byte {
	data := 16 * ms
	b := make([]byte, 44+data)
	copy(b, "RIFF")
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

func form(file []byte, fields ...string) ([]byte, string) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if file != nil {
		fw, _ := mw.CreateFormFile("file", "a.mp3")
		_, _ = fw.Write(file)
	}
	for i := 0; i+1 < len(fields); i += 2 {
		_ = mw.WriteField(fields[i], fields[i+1])
	}
	_ = mw.Close()
	return buf.Bytes(), mw.FormDataContentType()
}

// An upload becomes the JSON form: the file's format as its bytes say,
// the fields as members.
func TestFormBody(t *testing.T) {
	audio := wav(1500)
	body, ct := form(audio, "model", "openai/whisper-1", "temperature", "0.2",
		"timestamp_granularities[]", "word", "timestamp_granularities[]", "segment")
	out, apiErr := FormBody(body, ct)
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	j := gjson.ParseBytes(out)
	if j.Get("input_audio.format").Str != "wav" || j.Get("input_audio.data").Str != base64.StdEncoding.EncodeToString(audio) ||
		j.Get("model").Str != "openai/whisper-1" || j.Get("temperature").Num != 0.2 || j.Get("timestamp_granularities").Raw != `["word","segment"]` {
		t.Fatalf("%.300s", out)
	}
	for want, fields := range map[string][]string{
		"voice:": {"model", "m", "voice", "x"},
		"file:":  nil,
	} {
		file := audio
		if want == "file:" {
			file = []byte("not audio")
		}
		body, ct := form(file, fields...)
		if _, apiErr := FormBody(body, ct); apiErr == nil || apiErr.Status != 400 || !strings.HasPrefix(apiErr.Message, want) {
			t.Errorf("%s: %v", want, apiErr)
		}
	}
}
