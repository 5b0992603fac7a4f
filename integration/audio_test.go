package integration

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"mime/multipart"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// withAudioModels adds OpenAI-style audio models served by the mock's
// strict audio API through p: tts-1 priced 0.001 credits per character,
// one that stalls after its first chunk of audio, and whisper-1 priced
// 0.01 credits per second of audio.
func withAudioModels(t *testing.T, p *countingProxy) func(string) string {
	return func(cfg string) string {
		block := ""
		for _, m := range []string{"tts-1", "tts-1-speech-stall", "whisper-1"} {
			price := "character 0.001"
			if m == "whisper-1" {
				price = "audio_second 0.01"
			}
			block += fmt.Sprintf("\t\tmodel openai/%s {\n\t\t\tpricing {\n\t\t\t\tprompt 0\n\t\t\t\tcompletion 0\n\t\t\t\t%s\n\t\t\t}\n"+
				"\t\t\tprovider openai http://%s/v1 {\n\t\t\t\tmodel %s\n\t\t\t\tapi_key mock\n\t\t\t}\n\t\t}\n", m, price, p.addr(), m)
		}
		return replaceOnce(t, cfg, "\t\tmodel tollgate-mock:free {\n", block+"\t\tmodel tollgate-mock:free {\n")
	}
}

func speechBody(model, input, extra string) string {
	return fmt.Sprintf(`{"model":%q,"input":%q%s}`, model, input, extra)
}

func TestAudioSpeech(t *testing.T) {
	proxy := newCountingProxy(t, mockAddr)
	startInProcessWith(t, func(cfg string) string { return withAudioModels(t, proxy)(withCountingProxy(proxy)(cfg)) })
	c := newClient(t, gatewayAddr, adminAddr)
	tn := c.newTenant("organization", "10")
	key, _ := c.newKey(tn.MgmtKey, `{"name":"speech"}`)
	char := money.Amount(1_000_000) // 0.001 credits

	t.Run("spoken, priced per character", func(t *testing.T) {
		before := c.snapshot(key, tn.MgmtKey)
		r := c.mustPost("/audio/speech", key, speechBody("openai/tts-1", "Hello world", `,"voice":"nova","response_format":"mp3","speed":1.25`), nil).expect(t, 200)
		if len(r.Body) != 11*128 || r.Header.Get("Content-Type") != "audio/mpeg" || r.Header.Get("X-Generation-Id") == "" {
			t.Fatalf("answer %d bytes, header %v", len(r.Body), r.Header)
		}
		expectCharged(t, before, c.snapshot(key, tn.MgmtKey), 11*char, "eleven characters")
		g := c.api("GET", "/generation?id="+r.Header.Get("X-Generation-Id"), key, nil).expect(t, 200).JSON.Get("data")
		if g.Get("model").Str != "openai/tts-1" || creditAmount(t, g.Get("total_cost")) != 11*char {
			t.Fatalf("generation %s", g.Raw)
		}
		// The public default format is pcm.
		r = c.mustPost("/audio/speech", key, speechBody("openai/tts-1", "héllo", ""), nil).expect(t, 200)
		if r.Header.Get("Content-Type") != "audio/pcm" || len(r.Body) != 5*128 {
			t.Fatalf("pcm answer %d bytes, header %v", len(r.Body), r.Header)
		}
	})

	t.Run("a field the model does not take is a 400 naming it", func(t *testing.T) {
		for body, field := range map[string]string{
			speechBody("openai/tts-1", "hi", `,"voice":"en_paul_neutral"`): "voice:",
			speechBody("openai/tts-1", "hi", `,"speed":9`):                 "speed:",
			speechBody("openai/tts-1", "hi", `,"speed":"fast"`):            "speed:",
			speechBody("openai/tts-1", "hi", `,"response_format":"wav"`):   "response_format:",
			speechBody("openai/tts-1", strings.Repeat("a", 4097), ""):      "input:",
			`{"model":"openai/tts-1"}`:                                     "input:",
			speechBody("tollgate-mock", "hi", ""):                          "model:",
			speechBody("openai/tts-1", "hi", `,"input_references":[{}]`):   "input_references:",
		} {
			before := c.snapshot(key, tn.MgmtKey)
			calls := proxy.calls.Load()
			c.mustPost("/audio/speech", key, body, nil).expectError(t, 400, field)
			if proxy.calls.Load() != calls {
				t.Fatalf("%.60s reached the provider", body)
			}
			expectCharged(t, before, c.snapshot(key, tn.MgmtKey), 0, body)
		}
	})

	t.Run("guardrails scan the input", func(t *testing.T) {
		guarded, hash := c.newKey(tn.MgmtKey, `{"name":"guarded speech"}`)
		g := c.api("POST", "/guardrails", tn.MgmtKey, `{"name":"Speech rules","content_filters":[{"pattern":"\\bPROJ-[0-9]{4}\\b","action":"block","label":"project code"}]}`).
			expect(t, 201).JSON.Get("data.id").Str
		c.api("POST", "/guardrails/"+g+"/assignments/keys", tn.MgmtKey, `{"key_hashes":["`+hash+`"]}`).expect(t, 200)
		before := c.snapshot(guarded, tn.MgmtKey)
		calls := proxy.calls.Load()
		c.mustPost("/audio/speech", guarded, speechBody("openai/tts-1", "read PROJ-1234 aloud", ""), nil).expectError(t, 403, "project code")
		if proxy.calls.Load() != calls {
			t.Fatal("a blocked input reached the provider")
		}
		expectCharged(t, before, c.snapshot(guarded, tn.MgmtKey), 0, "blocked input")
		c.mustPost("/audio/speech", guarded, speechBody("openai/tts-1", "read this aloud", ""), nil).expect(t, 200)
	})

	t.Run("the audio streams as it comes, and a client that leaves stops the provider", func(t *testing.T) {
		before := c.snapshot(key, tn.MgmtKey)
		res, err := c.send("/audio/speech", key, speechBody("openai/tts-1-speech-stall", "stall here", ""), nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != 200 {
			t.Fatalf("status %d", res.StatusCode)
		}
		// The provider sent one chunk (a tenth of the audio) and waits:
		// it reaches the client before the rest.
		got := make(chan int, 1)
		go func() {
			b := make([]byte, 4096)
			n, _ := io.ReadAtLeast(res.Body, b, 160)
			got <- n
		}()
		select {
		case n := <-got:
			if n != 160 {
				t.Fatalf("first chunk %d bytes", n)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the first chunk of audio was held back")
		}
		res.Body.Close()
		after := c.waitUsage(key, tn.MgmtKey, before, 10*time.Second, 200*time.Millisecond)
		expectCharged(t, before, after, 10*char, "audio cut short by the client")
	})

	t.Run("a key cap that fits one speech request refuses the second", func(t *testing.T) {
		capped, _ := c.newKey(tn.MgmtKey, fmt.Sprintf(`{"name":"one speech","limit":%s}`, 15*char))
		one := speechBody("openai/tts-1", "ten chars!", "")
		refused(t, c, proxy, tn, capped, "/audio/speech", speechBody("openai/tts-1", strings.Repeat("b", 20), ""), "service_key_limit", "", false)
		c.mustPost("/audio/speech", capped, one, nil).expect(t, 200)
		refused(t, c, proxy, tn, capped, "/audio/speech", one, "service_key_limit", "", false)
	})
}

// testWAV is a 16-bit mono WAV of seconds at 8 kHz.
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

// uploadForm is a transcription's multipart upload of file, with the
// fields (name, value pairs).
func uploadForm(file []byte, fields ...string) (body string, contentType map[string]string) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if file != nil {
		fw, _ := mw.CreateFormFile("file", "speech.wav")
		_, _ = fw.Write(file)
	}
	for i := 0; i+1 < len(fields); i += 2 {
		_ = mw.WriteField(fields[i], fields[i+1])
	}
	_ = mw.Close()
	return buf.String(), map[string]string{"Content-Type": mw.FormDataContentType()}
}

func transcriptionJSON(model string, file []byte) string {
	return fmt.Sprintf(`{"model":%q,"input_audio":{"data":%q,"format":"wav"}}`, model, base64.StdEncoding.EncodeToString(file))
}

func TestAudioTranscriptions(t *testing.T) {
	proxy := newCountingProxy(t, mockAddr)
	startInProcessWith(t, func(cfg string) string { return withAudioModels(t, proxy)(withCountingProxy(proxy)(cfg)) })
	c := newClient(t, gatewayAddr, adminAddr)
	tn := c.newTenant("organization", "10")
	key, _ := c.newKey(tn.MgmtKey, `{"name":"transcriptions"}`)
	second := money.Amount(10_000_000) // 0.01 credits

	t.Run("an upload, priced per second measured", func(t *testing.T) {
		before := c.snapshot(key, tn.MgmtKey)
		body, hdr := uploadForm(testWAV(3), "model", "openai/whisper-1", "language", "en")
		r := c.mustPost("/audio/transcriptions", key, body, hdr).expect(t, 200)
		if !strings.HasPrefix(r.JSON.Get("text").Str, "Transcript of audio.wav") || r.JSON.Get("usage.seconds").Int() != 3 ||
			creditAmount(t, r.JSON.Get("usage.cost")) != 3*second || r.JSON.Get("segments").Exists() {
			t.Fatalf("answer %s", r.Body)
		}
		expectCharged(t, before, c.snapshot(key, tn.MgmtKey), 3*second, "three seconds")
		g := c.api("GET", "/generation?id="+r.Header.Get("X-Generation-Id"), key, nil).expect(t, 200).JSON.Get("data")
		if g.Get("model").Str != "openai/whisper-1" || creditAmount(t, g.Get("total_cost")) != 3*second {
			t.Fatalf("generation %s", g.Raw)
		}
	})

	t.Run("the JSON form, verbose", func(t *testing.T) {
		before := c.snapshot(key, tn.MgmtKey)
		body := strings.TrimSuffix(transcriptionJSON("openai/whisper-1", testWAV(2)), "}") + `,"response_format":"verbose_json","timestamp_granularities":["segment"]}`
		r := c.mustPost("/audio/transcriptions", key, body, nil).expect(t, 200)
		if r.JSON.Get("duration").Num != 2 || r.JSON.Get("segments.#").Int() != 1 || r.JSON.Get("usage.seconds").Int() != 2 {
			t.Fatalf("answer %s", r.Body)
		}
		expectCharged(t, before, c.snapshot(key, tn.MgmtKey), 2*second, "two seconds")
	})

	t.Run("a file that is not audio, or too large, is refused before anything is held", func(t *testing.T) {
		notAudio, notAudioHdr := uploadForm([]byte("just some text, not audio at all"), "model", "openai/whisper-1")
		noFile, noFileHdr := uploadForm(nil, "model", "openai/whisper-1")
		huge, hugeHdr := uploadForm(append(testWAV(1), make([]byte, 17<<20)...), "model", "openai/whisper-1")
		for _, tc := range []struct {
			body   string
			hdr    map[string]string
			status int
			msg    string
		}{
			{notAudio, notAudioHdr, 400, "file: not audio the gateway can measure"},
			{noFile, noFileHdr, 400, "file: required"},
			{huge, hugeHdr, 413, "larger than 16777216 bytes"},
			{transcriptionJSON("openai/whisper-1", []byte("RIFF....WAVEjunk")), nil, 400, "input_audio.data: not audio"},
			{transcriptionJSON("openai/tts-1", testWAV(1)), nil, 400, "model: not a speech to text model"},
		} {
			before := c.snapshot(key, tn.MgmtKey)
			calls := proxy.calls.Load()
			c.mustPost("/audio/transcriptions", key, tc.body, tc.hdr).expectError(t, tc.status, tc.msg)
			if proxy.calls.Load() != calls {
				t.Fatalf("%s reached the provider", tc.msg)
			}
			expectCharged(t, before, c.snapshot(key, tn.MgmtKey), 0, tc.msg)
		}
	})

	t.Run("a key's token rate limits count no audio bytes", func(t *testing.T) {
		limited, _ := c.newKey(tn.MgmtKey, `{"name":"token limited","rate_limits":{"prompt_tokens_per_minute":1000,"completion_tokens_per_minute":1000}}`)
		body, hdr := uploadForm(testWAV(2), "model", "openai/whisper-1")
		for range 2 {
			c.mustPost("/audio/transcriptions", limited, body, hdr).expect(t, 200)
		}
	})

	t.Run("a key cap that fits one transcription refuses the second", func(t *testing.T) {
		capped, _ := c.newKey(tn.MgmtKey, fmt.Sprintf(`{"name":"one transcription","limit":%s}`, 5*second))
		one := transcriptionJSON("openai/whisper-1", testWAV(3))
		refused(t, c, proxy, tn, capped, "/audio/transcriptions", transcriptionJSON("openai/whisper-1", testWAV(6)), "service_key_limit", "", false)
		c.mustPost("/audio/transcriptions", capped, one, nil).expect(t, 200)
		refused(t, c, proxy, tn, capped, "/audio/transcriptions", one, "service_key_limit", "", false)
	})
}
