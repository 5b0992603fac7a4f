package mockprovider

import (
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/tokenizer"
)

// OpenAIPromptTokens counts a request's prompt_tokens as OpenAI bills a
// model of the encoding, by the rules its cookbook documents ("How to
// count tokens with tiktoken"): 3 tokens a message, its values' tokens
// (role, content, a name and 1 more), 3 to prime the reply; function
// definitions as the cookbook's num_tokens_for_tools (7 a function, its
// "name:description", 3 for the parameters, 3 and "key:type:description"
// a property, an enum -3 and 3 and the value a item, 12 to end); a tool
// call as a message of its name and arguments; a JSON schema format 8
// and its name and JSON; an image 85 at detail low, 765 (a 1024×1024
// image's tiles) otherwise. api is "chat" or "responses".
func OpenAIPromptTokens(enc *tokenizer.Encoding, api string, body []byte) int {
	t := openAITokens{enc: enc, n: 3}
	req := gjson.ParseBytes(body)
	if api == "responses" {
		if ins := req.Get("instructions"); ins.Type == gjson.String {
			t.n += 3 + t.count("system") + t.count(ins.Str)
		}
		input := req.Get("input")
		if input.Type == gjson.String {
			t.n += 3 + t.count("user") + t.count(input.Str)
			input = gjson.Result{}
		}
		for _, item := range input.Array() {
			switch item.Get("type").Str {
			case "function_call":
				t.n += 3 + t.count(item.Get("name").Str) + t.count(item.Get("arguments").Str)
			case "function_call_output":
				t.n += 3 + t.count("tool") + t.count(item.Get("output").Str)
			default:
				t.message(item)
			}
		}
		if f := req.Get("text.format"); f.Get("type").Str == "json_schema" {
			t.schema(f)
		}
	} else {
		for _, m := range req.Get("messages").Array() {
			t.message(m)
		}
		t.schema(req.Get("response_format.json_schema"))
	}
	t.tools(req.Get("tools"))
	return t.n
}

// validPromptTokens reports a known Handler.PromptTokens.
func validPromptTokens(s string) bool {
	switch s {
	case "", "words", "bytes", tokenizer.O200kBase, tokenizer.Cl100kBase:
		return true
	}
	return false
}

type openAITokens struct {
	enc *tokenizer.Encoding
	n   int
}

func (t *openAITokens) count(s string) int { return t.enc.Count(s) }

func (t *openAITokens) message(m gjson.Result) {
	t.n += 3
	m.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "role":
			t.n += t.count(v.Str)
		case "name":
			t.n += 1 + t.count(v.Str)
		case "content":
			if v.Type == gjson.String {
				t.n += t.count(v.Str)
				break
			}
			for _, p := range v.Array() {
				switch p.Get("type").Str {
				case "image_url", "input_image":
					detail := p.Get("detail").Str
					if d := p.Get("image_url.detail"); d.Exists() {
						detail = d.Str
					}
					if detail == "low" {
						t.n += 85
					} else {
						t.n += 765
					}
				default:
					t.n += t.count(p.Get("text").Str)
				}
			}
		case "tool_calls":
			for _, c := range v.Array() {
				t.n += 3 + t.count(c.Get("function.name").Str) + t.count(c.Get("function.arguments").Str)
			}
		}
		return true
	})
}

func (t *openAITokens) tools(tools gjson.Result) {
	if !tools.IsArray() || len(tools.Array()) == 0 {
		return
	}
	for _, tool := range tools.Array() {
		f := tool
		if tool.Get("function").Exists() {
			f = tool.Get("function")
		}
		t.n += 7 + t.count(f.Get("name").Str+":"+f.Get("description").Str)
		props := f.Get("parameters.properties")
		if !f.Get("parameters").Exists() {
			continue
		}
		t.n += 3
		props.ForEach(func(k, p gjson.Result) bool {
			t.n += 3 + t.count(k.Str+":"+p.Get("type").Str+":"+p.Get("description").Str)
			if e := p.Get("enum"); e.IsArray() {
				t.n -= 3
				for _, item := range e.Array() {
					t.n += 3 + t.count(item.String())
				}
			}
			return true
		})
	}
	t.n += 12
}

func (t *openAITokens) schema(f gjson.Result) {
	if s := f.Get("schema"); s.Exists() {
		t.n += 8 + t.count(f.Get("name").Str) + t.count(s.Raw)
	}
}
