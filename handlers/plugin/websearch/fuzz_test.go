package websearch

import (
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// FuzzWebSearchPrepare checks that no body panics the middleware's rewrite
// (normalization, engine choice, server tool removal, native translation),
// that an accepted body stays valid JSON without the server tool, and that
// a refusal is a 400.
func FuzzWebSearchPrepare(f *testing.F) {
	for _, seed := range []string{
		`{"model":"x-ai/grok-4:online","messages":[{"role":"user","content":"q"}],"x_search_filter":{"allowed_x_handles":["a"]}}`,
		`{"model":"openai/gpt:online","input":"q","tools":[{"type":"function","name":"f"}]}`,
		`{"model":"anthropic/c","messages":[{"role":"user","content":"q"}],"plugins":[{"id":"web","exclude_domains":["*.a.example"]}]}`,
		`{"model":"meta/l","input":[{"role":"user","content":[{"type":"input_text","text":"q"}]}],"tools":[{"type":"service:web_search","parameters":{"engine":"exa","max_results":2}}]}`,
		`{"model":"meta/l","messages":[],"plugins":[{"id":"web","search_prompt":"s"}]}`,
	} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	ws := &WebSearch{gw: &testgw.Gateway{BrandName: "service"}}
	var err error
	if ws.settings, err = (&Config{DefaultEngine: "exa", EnginesRaw: engineConfigs(map[string]*EngineConfig{"exa": {}, "searxng": {BaseURL: "http://127.0.0.1:1"}})}).Build(nil, nil); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, responses bool) {
		kind := "chat"
		if responses {
			kind = "responses"
		}
		out, plan, _, apiErr := ws.prepare(body, dialect.Kind(kind))
		if apiErr != nil {
			if apiErr.Status != 400 || plan != nil {
				t.Fatalf("refusal %+v with plan %v", apiErr, plan)
			}
			return
		}
		if plan == nil {
			if string(out) != string(body) {
				t.Fatal("a body without search was rewritten")
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid output %q", out)
		}
		for _, tool := range gjson.GetBytes(out, "tools").Array() {
			if tool.Get("type").Str == "service:web_search" {
				t.Fatalf("server tool left in %s", out)
			}
		}
	})
}
