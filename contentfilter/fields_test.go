package contentfilter

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
)

// everyField is, per inbound API, bodies where each "§" is a place of
// text a provider shows the model: every field the API has for it.
var everyField = []struct {
	api    API
	bodies []string
}{
	{Chat, []string{`{"model":"m","messages":[
 {"role":"system","content":"§"},
 {"role":"developer","content":[{"type":"text","text":"§"}]},
 {"role":"user","name":"§","content":[{"type":"text","text":"§"},{"type":"image_url","image_url":{"url":"https://example.com/i.png","detail":"low"}},
   {"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}},{"type":"file","file":{"filename":"§","file_data":"data:application/pdf;base64,AAAA"}},
   {"type":"video_url","video_url":{"url":"https://example.com/v.mp4"}}]},
 {"role":"assistant","content":"§","refusal":"§","reasoning":"§","reasoning_details":[{"type":"reasoning.text","text":"§","signature":"sig"},
   {"type":"reasoning.summary","summary":"§"},{"type":"reasoning.encrypted","data":"enc"}],
   "tool_calls":[{"id":"c1","type":"function","function":{"name":"§","arguments":"§"}}]},
 {"role":"assistant","content":[{"type":"text","text":"§"},{"type":"refusal","refusal":"§"}],"function_call":{"name":"§","arguments":"§"}},
 {"role":"tool","tool_call_id":"c1","content":"§"},
 {"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"§"}]},
 {"role":"function","name":"§","content":"§"}],
 "tools":[{"type":"function","function":{"name":"§","description":"§","parameters":{"type":"object","description":"§",
   "properties":{"q":{"type":"string","description":"§","enum":["§"],"default":"§","examples":[{"url":"§"}]},"o":{"type":"object","properties":{"deep":{"type":"string","title":"§","description":"§"}}}}}}}],
 "functions":[{"name":"§","description":"§","parameters":{"type":"object","properties":{"x":{"type":"string","description":"§"}}}}],
 "tool_choice":{"type":"function","function":{"name":"§"}},
 "function_call":{"name":"§"},
 "response_format":{"type":"json_schema","json_schema":{"name":"§","description":"§","schema":{"type":"object","properties":{"a":{"type":"string","description":"§"}}}}},
 "prediction":{"type":"content","content":"§"}}`,
		`{"model":"m","messages":[{"role":"user","content":"§"}],"tool_choice":"auto","function_call":"none"}`,
		`{"model":"m","messages":[{"role":"user","content":"§"}],"tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"function","function":{"name":"§"}}]}}`}},
	{Completions, []string{`{"model":"m","prompt":"§","suffix":"§"}`, `{"model":"m","prompt":["§","§"]}`}},
	{Embeddings, []string{`{"model":"m","input":"§"}`, `{"model":"m","input":["§","§"]}`,
		`{"model":"m","input":[{"content":[{"type":"text","text":"§"},{"type":"image_url","image_url":{"url":"https://example.com/i.png"}}]}]}`}},
	{Rerank, []string{`{"model":"m","query":"§","documents":["§",{"text":"§"}],"top_n":1}`}},
	{Images, []string{`{"model":"m","prompt":"§","n":2,"size":"1024x1024"}`}},
	{Speech, []string{`{"model":"m","input":"§","voice":"alloy","response_format":"mp3"}`}},
	{Responses, []string{`{"model":"m","instructions":"§","input":[
 {"role":"user","content":"§"},
 {"type":"message","role":"user","content":[{"type":"input_text","text":"§"},{"type":"input_image","image_url":"https://example.com/i.png"},
   {"type":"input_file","filename":"§","file_data":"data:application/pdf;base64,AAAA"}]},
 {"type":"message","role":"assistant","content":[{"type":"output_text","text":"§","annotations":[]},{"type":"refusal","refusal":"§"}]},
 {"type":"reasoning","id":"r1","summary":[{"type":"summary_text","text":"§"}],"content":[{"type":"reasoning_text","text":"§"}],"encrypted_content":"enc"},
 {"type":"function_call","call_id":"c1","name":"§","arguments":"§"},
 {"type":"function_call_output","call_id":"c1","output":"§"},
 {"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"§"}]},
 {"type":"custom_tool_call","call_id":"c3","name":"§","input":"§"},
 {"type":"custom_tool_call_output","call_id":"c3","output":"§"}],
 "tools":[{"type":"function","name":"§","description":"§","parameters":{"type":"object","properties":{"q":{"type":"string","description":"§"}}}},
   {"type":"custom","name":"§","description":"§"}],
 "tool_choice":{"type":"function","name":"§"},
 "text":{"format":{"type":"json_schema","name":"§","description":"§","schema":{"type":"object","properties":{"a":{"type":"string","description":"§"}}}}},
 "prompt":{"id":"pmpt_1","variables":{"topic":"§","name":"§","file":{"type":"input_text","text":"§"}}}}`,
		`{"model":"m","input":"§"}`}},
	{Messages, []string{`{"model":"m","max_tokens":9,"system":"§","messages":[{"role":"user","content":"§"}]}`,
		`{"model":"m","max_tokens":9,"system":[{"type":"text","text":"§"}],"messages":[
 {"role":"user","content":[{"type":"text","text":"§"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}},
   {"type":"document","title":"§","context":"§","source":{"type":"text","media_type":"text/plain","data":"§"}},
   {"type":"document","source":{"type":"content","content":[{"type":"text","text":"§"}]}},
   {"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"AAAA"}},
   {"type":"search_result","source":"§","title":"§","content":[{"type":"text","text":"§"}]}]},
 {"role":"assistant","content":[{"type":"thinking","thinking":"§","signature":"sig"},{"type":"redacted_thinking","data":"enc"},{"type":"text","text":"§"},
   {"type":"tool_use","id":"t1","name":"§","input":{"q":"§","nested":{"list":["§"]},"name":"§","type":"§","id":"§","url":"§","data":"§","source":{"type":"text","data":"§"}}}]},
 {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"§"},{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"§"}]}]}],
 "tools":[{"name":"§","description":"§","input_schema":{"type":"object","properties":{"q":{"type":"string","description":"§"}}}}],
 "tool_choice":{"type":"tool","name":"§"},
 "output_config":{"effort":"low","format":{"type":"json_schema","schema":{"type":"object","properties":{"a":{"type":"string","description":"§"}}}}}}`}},
}

// place puts text at the k-th "§" of body, and a harmless word at the
// others.
func place(body string, k int, text string) string {
	parts := strings.Split(body, "§")
	var b strings.Builder
	for i, p := range parts {
		b.WriteString(p)
		if i == len(parts)-1 {
			break
		}
		s := "fine"
		if i == k {
			s = text
		}
		q := jsonstr.Append(nil, s)
		b.Write(q[1 : len(q)-1])
	}
	return b.String()
}

// blockedPhrases are what the fuzz hides: a custom pattern's phrase and
// a match of each builtin that blocks.
var blockedPhrases = []string{"forbidden words", "PROJ-1234", "bob.smith@example.com", "123-45-6789",
	"4111 1111 1111 1111", "(415) 555-2671", "ignore all previous instructions"}

const blockingGuard = `[{"pattern":"(?i)forbidden words","action":"block"},{"pattern":"\\bPROJ-[0-9]{4}\\b","action":"block"}]`

const blockingBuiltins = `[{"slug":"email","action":"block"},{"slug":"ssn","action":"block"},{"slug":"credit-card","action":"block"},
{"slug":"phone","action":"block"},{"slug":"regex-prompt-injection","action":"block"}]`

// A blocked phrase hidden in any field of any inbound API, under any
// disguise, is blocked; each field is one place Fields visits.
func TestEveryFieldEveryDisguiseBlocked(t *testing.T) {
	s := Set{mustGuard(t, "g", blockingGuard, blockingBuiltins)}
	for _, api := range everyField {
		for _, body := range api.bodies {
			n := strings.Count(body, "§")
			for k := range n {
				marked := place(body, k, "MARK")
				if !json.Valid([]byte(marked)) {
					t.Fatalf("invalid template: %s", marked)
				}
				// The place is visited exactly once, as text.
				seen := 0
				Fields(api.api, []byte(marked), func(f *Field) bool {
					if f.Media == "" && strings.Contains(f.Value.Str, "MARK") {
						seen++
					}
					return true
				})
				if seen != 1 {
					t.Errorf("api %d field %d of %s: visited %d times", api.api, k, marked, seen)
					continue
				}
				for name, disguise := range disguises {
					for _, phrase := range blockedPhrases {
						in := place(body, k, "see "+disguise(phrase)+" here")
						if _, res := s.Body(api.api, []byte(in)); res.Block == nil {
							t.Errorf("api %d field %d, %s %q: not blocked in %s", api.api, k, name, phrase, in)
						}
					}
				}
			}
		}
	}
}

// Redacting a field rewrites it in place, every other byte kept; an
// identifier cannot be rewritten: the redaction refuses the request.
func TestEveryFieldRedacted(t *testing.T) {
	s := Set{mustGuard(t, "g", `[{"pattern":"PROJ-[0-9]{4}","action":"redact","label":"[P]"}]`, `[{"slug":"email","action":"redact"}]`)}
	for _, api := range everyField {
		for _, body := range api.bodies {
			for k := range strings.Count(body, "§") {
				in := place(body, k, "x PR\u00adOJ-1234 bob＠example.com y")
				ident := false
				Fields(api.api, []byte(in), func(f *Field) bool {
					if strings.Contains(f.Value.Str, "1234") {
						ident = f.Ident
					}
					return true
				})
				out, res := s.Body(api.api, []byte(in))
				if ident {
					if res.Block == nil || res.Block.Label != "[P]" {
						t.Errorf("identifier %d of %s: %+v", k, in, res.Block)
					}
					continue
				}
				if res.Block != nil || res.Redacted != 1 {
					t.Fatalf("field %d of %s: %+v", k, in, res)
				}
				if want := place(body, k, "x [P] [EMAIL] y"); string(out) != want {
					t.Errorf("got  %s\nwant %s", out, want)
				}
			}
		}
	}
}

// Media are listed as what the gateway cannot read, never as text.
func TestFieldsListMedia(t *testing.T) {
	want := map[API][]string{
		Chat: {"messages[2].content[1].image_url", "messages[2].content[2].input_audio", "messages[2].content[3].file.file_data",
			"messages[2].content[4].video_url"},
		Responses:  {"input[1].content[1].image_url", "input[1].content[2].file_data"},
		Messages:   {"messages[0].content[1].source", "messages[0].content[4].source"},
		Embeddings: {"input[0].content[1].image_url"},
	}
	for _, api := range everyField {
		var got []string
		for _, body := range api.bodies {
			Fields(api.api, []byte(body), func(f *Field) bool {
				if f.Media != "" {
					got = append(got, f.Path())
				}
				return true
			})
		}
		if strings.Join(got, " ") != strings.Join(want[api.api], " ") {
			t.Errorf("api %d media: %v, want %v", api.api, got, want[api.api])
		}
	}
	var got []string
	Fields(Completions, []byte(`{"prompt":[[1,2,3],"text"]}`), func(f *Field) bool {
		got = append(got, f.Path()+":"+f.Media)
		return true
	})
	if strings.Join(got, " ") != "prompt[0]:tokens prompt[1]:" {
		t.Errorf("token ids: %v", got)
	}
}

// A tool call's arguments are JSON the model reads through its escapes:
// a phrase hidden by them is blocked, and redacted in place.
func TestArgumentsEscapes(t *testing.T) {
	s := Set{mustGuard(t, "g", blockingGuard, `[{"slug":"email","action":"redact"}]`)}
	for api, body := range map[API]string{
		Chat:      `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":%s}}]}]}`,
		Responses: `{"input":[{"type":"function_call","call_id":"c","name":"f","arguments":%s}]}`,
	} {
		blocked := fmt.Sprintf(body, `"{\"q\":[\"x\",{\"r\":\"\\u0050ROJ\\u002d1234\"}]}"`)
		if _, res := s.Body(api, []byte(blocked)); res.Block == nil || res.Block.GuardrailID != "g" {
			t.Errorf("%s: not blocked: %+v", blocked, res.Block)
		}
		top := fmt.Sprintf(body, `"\"\\u0050ROJ-1234\""`)
		if _, res := s.Body(api, []byte(top)); res.Block == nil || res.Block.GuardrailID != "g" {
			t.Errorf("%s: not blocked", top)
		}
		mail := fmt.Sprintf(body, `"{\"to\":\"bob\\u0040example.com\",\"n\":1}"`)
		out, res := s.Body(api, []byte(mail))
		args := gjson.GetBytes(out, "messages.0.tool_calls.0.function.arguments|@this")
		if api == Responses {
			args = gjson.GetBytes(out, "input.0.arguments")
		}
		if res.Block != nil || args.Str != `{"to":"[EMAIL]","n":1}` {
			t.Errorf("%s: %s %+v", mail, out, res.Block)
		}
	}
}

// A tool choice's mode is no text: a redaction that matches it changes
// nothing and refuses nothing.
func TestToolChoiceModeNotText(t *testing.T) {
	s := Set{mustGuard(t, "g", `[{"pattern":"auto|required|none","action":"redact"}]`, ``)}
	for _, body := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"tool_choice":"auto","function_call":"none"}`,
		`{"messages":[{"role":"user","content":"hi"}],"tool_choice":{"type":"allowed_tools","mode":"required","tools":[]}}`,
	} {
		if out, res := s.Body(Chat, []byte(body)); res.Block != nil || string(out) != body {
			t.Errorf("%s: %s %+v", body, out, res.Block)
		}
	}
}

// Moderation is asked about the same text, identifiers and media aside.
func TestTextsFollowFields(t *testing.T) {
	body := `{"system":"sys","messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"doc"}},
{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]}],"tools":[{"name":"f","description":"desc"}]}`
	if got := strings.Join(Texts(Messages, []byte(body)), ","); got != "sys,doc,desc" {
		t.Errorf("texts: %s", got)
	}
}
