package autorouter

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/plugintest"
)

func TestConformance(t *testing.T) {
	plugintest.Run(t, plugintest.Case{Plugin: &AutoRouter{Models: []string{"a/small"}}})
}

// fakeCandidates are catalog models by id; tokens is every prompt's count.
type fakeCandidates struct {
	models map[string]*catalog.Model
	tokens int64
}

func (c *fakeCandidates) Usable(id string) *catalog.Model { return c.models[id] }

func (c *fakeCandidates) PromptTokens(*catalog.Model) int64 { return c.tokens }

func model(id string, window int64, prompt, completion string, params, inputs string) *catalog.Model {
	p, _ := billing.ParsePrice(prompt)
	c, _ := billing.ParsePrice(completion)
	return &catalog.Model{ID: id, ContextLength: window, Pricing: billing.Pricing{Prompt: p, Completion: c},
		Public: []byte(`{"supported_parameters":` + params + `,"architecture":{"input_modalities":` + inputs + `}}`)}
}

func candidates(tokens int64) *fakeCandidates {
	return &fakeCandidates{tokens: tokens, models: map[string]*catalog.Model{
		// In the operator's order: small and cheap, mid, big and dear.
		"a/small": model("a/small", 1000, "0.000001", "0.000002", `["max_tokens"]`, `["text"]`),
		"a/mid":   model("a/mid", 8000, "0.0000005", "0.000001", `["tools","response_format","structured_outputs"]`, `["text","image"]`),
		"b/big":   model("b/big", 100000, "0.00001", "0.00003", `["tools","reasoning","structured_outputs"]`, `["text","image","file","audio"]`),
	}}
}

func TestChooseModel(t *testing.T) {
	for _, tc := range []struct {
		name   string
		kind   dialect.Kind
		prefer string
		tokens int64
		body   string
		want   string // a model id, or the start of the error after "error: "
	}{
		{"first that fits", dialect.Chat, "", 10, `{"messages":[{"role":"user","content":"hi"}]}`, "a/small"},
		{"cheapest", dialect.Chat, PreferCheapest, 10, `{"messages":[]}`, "a/mid"},
		{"tools", dialect.Chat, "", 10, `{"tools":[{"type":"function","function":{"name":"f"}}]}`, "a/mid"},
		{"empty tools need none", dialect.Chat, "", 10, `{"tools":[]}`, "a/small"},
		{"json schema", dialect.Responses, "", 10, `{"text":{"format":{"type":"json_schema"}}}`, "a/mid"},
		{"reasoning", dialect.Chat, "", 10, `{"reasoning":{"effort":"high"}}`, "b/big"},
		{"reasoning off", dialect.Chat, "", 10, `{"reasoning":{"effort":"none"}}`, "a/small"},
		{"reasoning_effort", dialect.Chat, "", 10, `{"reasoning_effort":"low"}`, "b/big"},
		{"thinking", dialect.Messages, "", 10, `{"thinking":{"type":"enabled","budget_tokens":1024}}`, "b/big"},
		{"image", dialect.Chat, "", 10, `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}`, "a/mid"},
		{"responses file", dialect.Responses, "", 10, `{"input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]}`, "b/big"},
		{"audio", dialect.Chat, "", 10, `{"messages":[{"role":"user","content":[{"type":"input_audio"}]}]}`, "b/big"},
		{"messages image", dialect.Messages, "", 10, `{"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`, "a/mid"},
		{"long prompt", dialect.Chat, "", 5000, `{}`, "a/mid"},
		{"prompt and output", dialect.Chat, "", 5000, `{"max_tokens":4000}`, "b/big"},
		{"max_completion_tokens", dialect.Chat, "", 500, `{"max_completion_tokens":600}`, "a/mid"},
		{"nothing fits", dialect.Chat, "", 200000, `{}`, "error: model: no candidate of the auto router fits the request (a/small: the prompt's 200000 tokens"},
		{"allowed", dialect.Chat, "", 10, `{"plugins":[{"id":"auto-router","allowed_models":["b/*"]}]}`, "b/big"},
		{"excluded wins", dialect.Chat, "", 10, `{"plugins":[{"id":"auto-router","allowed_models":["a/*"],"excluded_models":["*small"]}]}`, "a/mid"},
		{"beta id", dialect.Chat, "", 10, `{"plugins":[{"id":"auto-beta-router","excluded_models":["a/small"]}]}`, "a/mid"},
		{"none allowed", dialect.Chat, "", 10, `{"plugins":[{"id":"auto-router","allowed_models":["c/*"]}]}`, "error: plugins[0].allowed_models: no candidate"},
		{"disabled entry", dialect.Chat, "", 10, `{"plugins":[{"id":"auto-router","enabled":false,"allowed_models":["c/*"]}]}`, "a/small"},
		// Ranked by price: mid, small, big.
		{"tier low", dialect.Chat, "", 10, `{"plugins":[{"id":"auto-router","cost_tier":"low"}]}`, "a/mid"},
		{"tier high", dialect.Chat, "", 10, `{"plugins":[{"id":"auto-router","cost_tier":"high"}]}`, "a/small"},
		{"tier max", dialect.Chat, "", 10, `{"plugins":[{"id":"auto-router","cost_tier":"max"}]}`, "b/big"},
		{"tier over tradeoff", dialect.Chat, "", 10, `{"plugins":[{"id":"auto-router","cost_tier":"max","cost_quality_tradeoff":10}]}`, "b/big"},
		// 90-8t: t=10 keeps the cheapest third only; t=0 all, the first in order.
		{"tradeoff 10", dialect.Chat, "", 10, `{"plugins":[{"id":"auto-router","cost_quality_tradeoff":10}]}`, "a/mid"},
		{"tradeoff 0", dialect.Chat, "", 10, `{"plugins":[{"id":"auto-router","cost_quality_tradeoff":0}]}`, "a/small"},
		{"bad tier", dialect.Chat, "", 10, `{"plugins":[{"id":"auto-router","cost_tier":"cheap"}]}`, "error: plugins[0].cost_tier: expected one of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &AutoRouter{Models: []string{"a/small", "a/mid", "b/big"}, Prefer: tc.prefer}
			req := &plugin.Request{Kind: tc.kind, Body: []byte(tc.body), Plugins: gjson.Get(tc.body, "plugins")}
			got, apiErr := p.ChooseModel(req, candidates(tc.tokens))
			if wantErr, ok := strings.CutPrefix(tc.want, "error: "); ok {
				if apiErr == nil || apiErr.Status != 400 || !strings.HasPrefix(apiErr.Message, wantErr) {
					t.Fatalf("ChooseModel = %q, %v; want a 400 starting %q", got, apiErr, wantErr)
				}
				return
			}
			if apiErr != nil || got != tc.want {
				t.Fatalf("ChooseModel = %q, %v; want %q", got, apiErr, tc.want)
			}
		})
	}
}

func TestNoUsableCandidate(t *testing.T) {
	p := &AutoRouter{Models: []string{"a/small", "x/unknown"}}
	c := candidates(10)
	delete(c.models, "a/small")
	_, apiErr := p.ChooseModel(&plugin.Request{Kind: dialect.Chat, Body: []byte(`{}`)}, c)
	if apiErr == nil || apiErr.Message != "model: the auto router has no candidate this key may use" {
		t.Fatalf("ChooseModel = %v", apiErr)
	}
}

func TestChooses(t *testing.T) {
	p := &AutoRouter{Models: []string{"a/small"}, brand: "acme"}
	for id, want := range map[string]bool{"acme/auto": true, "openrouter/auto": true, "other/auto": false, "auto": false, "acme/small": false} {
		if p.Chooses(id) != want {
			t.Errorf("Chooses(%q) = %v", id, !want)
		}
	}
	if (&AutoRouter{brand: "acme"}).Chooses("acme/auto") {
		t.Error("a router without candidates chooses")
	}
}

func TestCheckEntry(t *testing.T) {
	long := `"` + strings.Repeat("x", maxPatternLen+1) + `"`
	for entry, want := range map[string]string{
		`{"id":"auto-router","allowed_models":["a/*"],"excluded_models":[],"cost_tier":"low","cost_quality_tradeoff":9,"pin_model":false}`: "",
		`{"id":"auto-router","allowed_models":"a/*"}`:          "plugins[1].allowed_models: expected an array of model patterns",
		`{"id":"auto-router","excluded_models":[1]}`:           "plugins[1].excluded_models[0]: expected a string",
		`{"id":"auto-router","allowed_models":[` + long + `]}`: "plugins[1].allowed_models[0]: at most 1024 characters",
		`{"id":"auto-router","cost_quality_tradeoff":11}`:      "plugins[1].cost_quality_tradeoff: expected an integer from 0 to 10",
		`{"id":"auto-router","cost_quality_tradeoff":1.5}`:     "plugins[1].cost_quality_tradeoff: expected an integer from 0 to 10",
		`{"id":"auto-router","pin_model":true}`:                "plugins[1].pin_model: not offered by this gateway",
		`{"id":"auto-router","pin_model":"yes"}`:               "plugins[1].pin_model: expected a boolean",
	} {
		apiErr := new(AutoRouter).CheckEntry("plugins[1]", gjson.Parse(entry))
		if (apiErr == nil) != (want == "") || apiErr != nil && !strings.HasPrefix(apiErr.Message, want) {
			t.Errorf("CheckEntry(%.80s) = %v, want %q", entry, apiErr, want)
		}
	}
	many := `{"id":"auto-router","allowed_models":[` + strings.Repeat(`"a",`, maxPatterns) + `"a"]}`
	if apiErr := new(AutoRouter).CheckEntry("plugins[0]", gjson.Parse(many)); apiErr == nil || apiErr.Message != "plugins[0].allowed_models: at most 1024 patterns" {
		t.Errorf("1025 patterns: %v", apiErr)
	}
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, id string
		want        bool
	}{
		{"a/*", "a/b", true}, {"a/*", "b/a", false}, {"*", "x/y", true}, {"a/b", "a/b", true},
		{"a/b", "a/bc", false}, {"*-mini", "openai/gpt-4o-mini", true}, {"*/*:free", "a/b:free", true},
		{"a*b*c", "axxbyyc", true}, {"a*b*c", "axxbyy", false}, {"", "", true}, {"", "a", false},
	} {
		if match(tc.pattern, tc.id) != tc.want {
			t.Errorf("match(%q, %q) = %v", tc.pattern, tc.id, !tc.want)
		}
	}
}

func TestUnmarshalCaddyfile(t *testing.T) {
	var p AutoRouter
	d := caddyfile.NewTestDispenser("auto_router {\n\tmodels a/small a/mid\n\tmodels b/big\n\tprefer cheapest\n}")
	if err := p.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	if strings.Join(p.Models, " ") != "a/small a/mid b/big" || p.Prefer != PreferCheapest {
		t.Fatalf("got %+v", p)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []AutoRouter{{Prefer: "fast"}, {Models: []string{"a", "a"}}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil", bad)
		}
	}
}
