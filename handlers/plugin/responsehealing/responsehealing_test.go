package responsehealing

import (
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/plugintest"
	"github.com/tollgate-dev/caddy-tollgate/healjson"
	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
)

func TestHealingFor(t *testing.T) {
	for _, tc := range []struct {
		name, kind, body string
		want             bool
		schema           bool
		err              string
	}{
		{"no plugin", "chat", `{"response_format":{"type":"json_object"}}`, false, false, ""},
		{"json_object", "chat", `{"response_format":{"type":"json_object"},"plugins":[{"id":"response-healing"}]}`, true, false, ""},
		{"disabled", "chat", `{"response_format":{"type":"json_object"},"plugins":[{"id":"response-healing","enabled":false}]}`, false, false, ""},
		{"text answer", "chat", `{"plugins":[{"id":"response-healing"}]}`, false, false, ""},
		{"json_schema", "chat", `{"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}},"plugins":[{"id":"web"},{"id":"response-healing"}]}`, true, true, ""},
		{"responses", "responses", `{"text":{"format":{"type":"json_schema","name":"x","schema":{"type":"object"}}},"plugins":[{"id":"response-healing"}]}`, true, true, ""},
		{"messages", "messages", `{"plugins":[{"id":"response-healing"}]}`, false, false, "plugins[0].id: the response-healing plugin applies"},
		{"word in the prompt only", "chat", `{"messages":[{"role":"user","content":"response-healing"}]}`, false, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, apiErr := healingFor(dialect.Kind(tc.kind), []byte(tc.body), gjson.Get(tc.body, "plugins"))
			if tc.err != "" {
				if apiErr == nil || !strings.Contains(apiErr.Message, tc.err) || apiErr.Status != 400 {
					t.Fatalf("error %v, want %q", apiErr, tc.err)
				}
				return
			}
			if apiErr != nil || (h != nil) != tc.want || (h != nil && (h.schema != nil) != tc.schema) {
				t.Fatalf("healing %+v, %v", h, apiErr)
			}
		})
	}
}

func TestConformance(t *testing.T) {
	plugintest.Run(t, plugintest.Case{
		Plugin: new(Healing),
		Kind:   dialect.Chat,
		Asks:   `{"response_format":{"type":"json_object"},"plugins":[{"id":"response-healing"}]}`,
	})
}

func TestCheckEntry(t *testing.T) {
	for entry, want := range map[string]string{
		`{"id":"response-healing"}`:                "",
		`{"id":"response-healing","enabled":true}`: "",
		`{"id":"response-healing","enabled":1}`:    "plugins[1].enabled: expected a boolean",
		`{"id":"response-healing","x":1}`:          "plugins[1].x: unknown field of the response-healing plugin",
	} {
		apiErr := new(Healing).CheckEntry("plugins[1]", gjson.Parse(entry))
		if (apiErr == nil) != (want == "") || (apiErr != nil && apiErr.Message != want) {
			t.Errorf("CheckEntry(%s) = %v, want %q", entry, apiErr, want)
		}
	}
}

// A healed answer goes out through the plugin's writer, its length and
// report set.
func TestWrapAnswer(t *testing.T) {
	run, apiErr := new(Healing).Plan(plugintest.Request(dialect.Chat,
		`{"response_format":{"type":"json_object"},"plugins":[{"id":"response-healing"}]}`))
	if apiErr != nil || run == nil {
		t.Fatalf("Plan = %v, %v", run, apiErr)
	}
	rec := httptest.NewRecorder()
	aw := run.(plugin.AnswerWrapper)
	w := aw.WrapAnswer(rec)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(200)
	_, _ = w.Write([]byte(`{"choices":[{"message":{"content":"{a: 1}"}}]}`))
	aw.FinishAnswer()
	if got := rec.Body.String(); got != `{"choices":[{"message":{"content":"{\"a\":1}"}}]}` ||
		rec.Header().Get(healingHeader) != "repaired=unquoted_key" || rec.Header().Get("Content-Length") != strconv.Itoa(len(got)) {
		t.Fatalf("answer %s, headers %v", got, rec.Header())
	}
}

func TestHealAnswer(t *testing.T) {
	h := &healing{kind: "chat"}
	body := `{"id":"gen-1","choices":[{"index":0,"message":{"role":"assistant","content":"{a: 1,}"}},` +
		`{"index":1,"message":{"role":"assistant","content":"{\"b\": 2}"}}],"usage":{"prompt_tokens":1,"cost":0.5}}`
	out, report := h.heal([]byte(body))
	want := `{"id":"gen-1","choices":[{"index":0,"message":{"role":"assistant","content":"{\"a\":1}"}},` +
		`{"index":1,"message":{"role":"assistant","content":"{\"b\": 2}"}}],"usage":{"prompt_tokens":1,"cost":0.5}}`
	if string(out) != want || report != "repaired=trailing_comma,unquoted_key" {
		t.Fatalf("heal = %s, %q", out, report)
	}
	// Nothing to repair: the very bytes.
	if out, report := h.heal([]byte(want)); string(out) != want || report != "repaired=none" {
		t.Fatalf("heal(valid) = %s, %q", out, report)
	}
	// Tool calls (no text) and a body that is not JSON: untouched, no report.
	for _, b := range []string{`{"choices":[{"message":{"content":null,"tool_calls":[]}}]}`, `not json`} {
		if out, report := h.heal([]byte(b)); string(out) != b || report != "" {
			t.Fatalf("heal(%s) = %s, %q", b, out, report)
		}
	}
	r := &healing{kind: "responses"}
	// output_text, before output here, is healed too.
	body = `{"output_text":"{a:1}","output":[{"type":"message","content":[{"type":"output_text","text":"{a:1}"}]}]}`
	out, report = r.heal([]byte(body))
	if string(out) != `{"output_text":"{\"a\":1}","output":[{"type":"message","content":[{"type":"output_text","text":"{\"a\":1}"}]}]}` ||
		report != "repaired=unquoted_key" {
		t.Fatalf("heal(output_text) = %s, %q", out, report)
	}
	body = `{"output":[{"type":"reasoning","summary":[]},{"type":"message","content":[{"type":"output_text","text":"'x'"},{"type":"output_text","text":"[1,]"}]}]}`
	out, report = r.heal([]byte(body))
	if string(out) != `{"output":[{"type":"reasoning","summary":[]},{"type":"message","content":[{"type":"output_text","text":"'x'"},{"type":"output_text","text":"[1]"}]}]}` ||
		report != "unrepairable" {
		t.Fatalf("heal(responses) = %s, %q", out, report)
	}
}

// A request without the plugin pays a byte search of its plugins.
func BenchmarkHealingForWithout(b *testing.B) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("hello ", 2000) + `"}],"response_format":{"type":"json_object"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if h, _ := healingFor("chat", body, gjson.GetBytes(body, "plugins")); h != nil {
			b.Fatal("healing without the plugin")
		}
	}
}

// healBenchAnswer is a chat answer whose 10 KB text needs most repairs,
// and a schema it satisfies.
func healBenchAnswer(b *testing.B) ([]byte, *healjson.Schema) {
	var text strings.Builder
	text.WriteString("Here is the JSON:\n```json\n{items: [\n")
	for text.Len() < 10<<10 {
		text.WriteString("  {id: 12345, 'name': 'item number twelve', \"tags\": [\"alpha\", \"beta\",], ok: True,},\n")
	}
	text.WriteString("]}\n```")
	body := []byte(`{"id":"gen-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":` +
		string(jsonstr.Quote(text.String())) + `},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2000}}`)
	s, err := healjson.Compile([]byte(`{"type":"object","properties":{"items":{"type":"array","items":{"type":"object",
		"properties":{"id":{"type":"integer"},"name":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}},"ok":{"type":"boolean"}},
		"required":["id","name","tags","ok"]}}},"required":["items"]}`))
	if err != nil {
		b.Fatal(err)
	}
	return body, s
}

// Healing a 10 KB answer (json_object): the goal is under 200 µs.
func BenchmarkHealAnswer10KB(b *testing.B) {
	body, _ := healBenchAnswer(b)
	h := &healing{kind: "chat"}
	if _, report := h.heal(body); !strings.HasPrefix(report, "repaired=code_fence") {
		b.Fatalf("report %q", report)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		h.heal(body)
	}
}

// The same with json_schema: the JSON Schema check of its 115 objects
// comes on top.
func BenchmarkHealAnswer10KBSchema(b *testing.B) {
	body, s := healBenchAnswer(b)
	h := &healing{kind: "chat", schema: s}
	if _, report := h.heal(body); !strings.HasSuffix(report, "schema=valid") {
		b.Fatalf("report %q", report)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		h.heal(body)
	}
}
