package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect/openai"
)

// A provider's dialect is a tollgate.dialects module: the provider
// block's style and options, flat or in the style's block, are read by
// the module's UnmarshalCaddyfile into the provider's "dialect"; the
// older JSON fields (style, settings) load the same module.
func TestProviderDialectModule(t *testing.T) {
	adaptProvider := func(block string) (gjson.Result, error) {
		caddyfile := "{\n tollgate {\n model m {\n pricing {\n prompt 0\n completion 0\n }\n provider p https://x.openai.azure.com {\n api_key k\n" +
			block + "\n }\n }\n }\n}\n\n:8080 {\n\ttollgate\n}\n"
		out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
		return gjson.GetBytes(out, "apps.tollgate.models.0.providers.0"), err
	}
	want := `{"api_version":"2024-10-21","deployment":"gpt4o","style":"azure"}`
	for _, block := range []string{
		"style azure\n deployment gpt4o\n api_version 2024-10-21",
		"deployment gpt4o\n style azure\n api_version 2024-10-21",
		"style azure {\n deployment gpt4o\n api_version 2024-10-21\n }",
	} {
		p, err := adaptProvider(block)
		if err != nil {
			t.Fatalf("%q: %v", block, err)
		}
		var got any // members in order, as want lists them
		_ = json.Unmarshal([]byte(p.Get("dialect").Raw), &got)
		if b, _ := json.Marshal(got); string(b) != want || p.Get("style").Exists() || p.Get("settings").Exists() {
			t.Errorf("%q: provider %s", block, p.Raw)
		}
	}
	if p, err := adaptProvider(""); err != nil || p.Get("dialect").Exists() {
		t.Errorf("default style: %s, %v", p.Raw, err)
	}
	for block, msg := range map[string]string{
		"style gemini\n deployment gpt4o":             "deployment: not an option of style gemini",
		"style azure {\n aws_region us-east-1\n }":    "aws_region: not an option of style azure",
		"style azure\n deployment gpt4o":              "api_version: required for style azure",
		"style azure\n deployment gpt4o 2024-10-21":   "wrong argument count",
		"style bedrock\n aws_region mars-1":           `aws_region: "mars-1" is not an AWS region`,
		"style gemini {\n auth oauth\n }":             `auth: expected api_key or service_account, got "oauth"`,
		"style palm":                                  `style: unsupported "palm"`,
		"style azure extra\n deployment gpt4o":        "wrong argument count",
		"deployment gpt4o\n api_version 2024-10-21\n": "deployment: not an option of style openai",
	} {
		if _, err := adaptProvider(block); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: error %v, want %q", block, err, msg)
		}
	}

	// The same provider in JSON, as configs carry it now and as they did.
	for name, pc := range map[string]ProviderConfig{
		"dialect":  {Name: "p", BaseURL: "https://x.openai.azure.com", APIKey: "k", DialectRaw: json.RawMessage(want)},
		"settings": {Name: "p", BaseURL: "https://x.openai.azure.com", APIKey: "k", Style: "azure", Settings: map[string]string{"deployment": "gpt4o", "api_version": "2024-10-21"}},
	} {
		app := provisioned(t, &App{Models: []ModelConfig{{ID: "m", Pricing: PricingConfig{Prompt: "0", Completion: "0"}, Providers: []ProviderConfig{pc}}}})
		m, _ := app.Catalog().Lookup("m")
		p := m.Providers[0]
		if p.Style != openai.StyleAzure || p.Module == nil || p.Dialect.Name() != openai.StyleAzure ||
			p.Dialect.URI("chat", false, "/chat/completions", false) != "/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21" {
			t.Errorf("%s: provider %+v", name, p)
		}
	}
	both := ProviderConfig{Name: "p", BaseURL: "http://x", Style: "openai", DialectRaw: json.RawMessage(`{"style":"openai"}`)}
	app := &App{DataDir: t.TempDir(), Models: []ModelConfig{{ID: "m", Pricing: PricingConfig{Prompt: "0", Completion: "0"}, Providers: []ProviderConfig{both}}}}
	if err := app.Provision(appContext(t)); err == nil || !strings.Contains(err.Error(), "dialect: set instead of style and settings") {
		t.Errorf("both forms: %v", err)
	}
}
