package caddymodule

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/money"
)

// adaptApp adapts a Caddyfile's global options and decodes the tollgate app.
func adaptApp(t *testing.T, global string) *App {
	t.Helper()
	apps := adaptApps(t, "{\n"+global+"\n}\n\n:8080 {\n\ttollgate\n}\n")
	app := new(App)
	if err := json.Unmarshal(apps[gateway.AppName], app); err != nil {
		t.Fatal(err)
	}
	return app
}

// provisioned provisions and validates app.
func provisioned(t *testing.T, app *App) *App {
	t.Helper()
	if app.DataDir == "" {
		app.DataDir = t.TempDir()
	}
	if err := app.Provision(appContext(t)); err != nil {
		t.Fatal(err)
	}
	if err := app.Validate(); err != nil {
		t.Fatal(err)
	}
	return app
}

func price(t *testing.T, s string) billing.Price {
	t.Helper()
	p, err := billing.ParsePrice(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCatalogFromCaddyfile(t *testing.T) {
	t.Setenv("TOLLGATE_TEST_OPENAI_KEY", "sk-test-123")
	app := provisioned(t, adaptApp(t, `	tollgate {
		model openai/gpt-4o {
			name "GPT-4o"
			context_length 128000
			max_completion_tokens 16384
			pricing {
				prompt 0.0000025
				completion 0.00001
				request 0.001
				web_search 0.004
			}
			provider openai https://api.openai.com/v1/ {
				model gpt-4o-2024-08-06
				api_key {env.TOLLGATE_TEST_OPENAI_KEY}
				style openai
			}
			provider backup http://10.0.0.2:8000 {
				api chat
			}
		}
		model local:free {
			pricing {
				prompt 0
				completion 0
			}
		}
	}`))
	if got := app.Models[0].Providers[0].APIKey; got != "{env.TOLLGATE_TEST_OPENAI_KEY}" {
		t.Errorf("config api_key = %q, want the placeholder kept", got)
	}
	models := app.Catalog().Models()
	if len(models) != 2 || models[0].ID != "openai/gpt-4o" || models[1].ID != "local:free" {
		t.Fatalf("models = %v", models)
	}
	m := models[0]
	wantPricing := billing.Pricing{Prompt: price(t, "0.0000025"), Completion: price(t, "0.00001"), Request: price(t, "0.001"), WebSearch: price(t, "0.004")}
	if m.Name != "GPT-4o" || m.ContextLength != 128000 || m.MaxCompletionTokens != 16384 || m.Pricing != wantPricing {
		t.Errorf("model = %+v", m)
	}
	wantProviders := []catalog.Provider{
		{Name: "openai", BaseURL: "https://api.openai.com/v1/", Model: "gpt-4o-2024-08-06", APIKey: "sk-test-123", Style: "openai",
			Scheme: "https", Dial: "api.openai.com:443", Host: "api.openai.com", BasePath: "/v1"},
		{Name: "backup", BaseURL: "http://10.0.0.2:8000", Model: "openai/gpt-4o", Style: "openai", API: "chat",
			Scheme: "http", Dial: "10.0.0.2:8000", Host: "10.0.0.2:8000", BasePath: ""},
	}
	if len(m.Providers) != len(wantProviders) {
		t.Fatalf("providers = %d", len(m.Providers))
	}
	for i, want := range wantProviders {
		got := *m.Providers[i]
		got.Stats, got.Breaker = nil, nil // the endpoint's measurements and breaker, checked by their packages
		if got.Dialect == nil || got.Dialect.Name() != got.Style {
			t.Errorf("provider %d: dialect %v for style %s", i, got.Dialect, got.Style)
		}
		got.Dialect = nil
		if !sameProvider(got, want) {
			t.Errorf("provider %d = %+v\nwant %+v", i, got, want)
		}
	}

	pub := gjson.ParseBytes(m.Public)
	for path, want := range map[string]string{
		"id":                                 `"openai/gpt-4o"`,
		"canonical_slug":                     `"openai/gpt-4o"`,
		"name":                               `"GPT-4o"`,
		"created":                            "1704067200",
		"description":                        `""`,
		"context_length":                     "128000",
		"architecture.modality":              `"text->text"`,
		"architecture.input_modalities":      `["text"]`,
		"architecture.output_modalities":     `["text"]`,
		"pricing.prompt":                     `"0.0000025"`,
		"pricing.completion":                 `"0.00001"`,
		"pricing.request":                    `"0.001"`,
		"pricing.web_search":                 `"0.004"`,
		"top_provider.context_length":        "128000",
		"top_provider.is_moderated":          "false",
		"top_provider.max_completion_tokens": "16384",
		"per_request_limits":                 "null",
		"supported_voices":                   "null",
		"default_parameters":                 "null",
		"links.details":                      `"/api/v1/models/openai/gpt-4o/endpoints"`,
	} {
		if got := pub.Get(path).Raw; got != want {
			t.Errorf("public %s = %s, want %s", path, got, want)
		}
	}
	if !pub.Get("supported_parameters").IsArray() || strings.Contains(string(m.Public), "providers") ||
		strings.Contains(string(m.Public), "sk-test") {
		t.Errorf("public = %s", m.Public)
	}
	free := gjson.ParseBytes(models[1].Public)
	if free.Get("name").Str != "local:free" || free.Get("context_length").Type != gjson.Null ||
		free.Get("top_provider.max_completion_tokens").Type != gjson.Null || free.Get("pricing.prompt").Str != "0" {
		t.Errorf("defaults: %s", models[1].Public)
	}
}

const modelsFile = `{
  "data": [
    {
      "id": "acme/big",
      "name": "Acme Big",
      "created": 1720000000,
      "description": "A big model.",
      "context_length": 32000,
      "architecture": {"modality": "text+image->text", "input_modalities": ["text", "image"], "output_modalities": ["text"], "tokenizer": "Llama3", "instruct_type": null},
      "pricing": {"prompt": "0.000003", "completion": "0.000015", "image": "0.0048"},
      "top_provider": {"context_length": 32000, "max_completion_tokens": 8000, "is_moderated": true},
      "supported_parameters": ["temperature", "seed"],
      "hugging_face_id": "acme/big",
      "tollgate": {"providers": [{"name": "acme", "base_url": "https://api.acme.test/openai/v1", "model": "big-2", "api_key": "{env.TOLLGATE_TEST_ACME_KEY}"}]}
    },
    {"id": "acme/small", "pricing": {"prompt": "0", "completion": "0"}}
  ]
}`

func TestCatalogFromModelsFile(t *testing.T) {
	t.Setenv("TOLLGATE_TEST_ACME_KEY", "acme-secret")
	path := filepath.Join(t.TempDir(), "models.json")
	if err := os.WriteFile(path, []byte(modelsFile), 0o600); err != nil {
		t.Fatal(err)
	}
	app := provisioned(t, &App{ModelsFile: path, Models: []ModelConfig{
		{ID: "configured", Pricing: PricingConfig{Prompt: "1", Completion: "2"}},
	}})
	models := app.Catalog().Models()
	if len(models) != 3 || models[0].ID != "acme/big" || models[1].ID != "acme/small" || models[2].ID != "configured" {
		t.Fatalf("models = %v (file models first, then configured ones)", models)
	}
	big := models[0]
	if big.Name != "Acme Big" || big.ContextLength != 32000 || big.MaxCompletionTokens != 8000 ||
		big.Pricing != (billing.Pricing{Prompt: price(t, "0.000003"), Completion: price(t, "0.000015")}) {
		t.Errorf("big = %+v", big)
	}
	want := catalog.Provider{Name: "acme", BaseURL: "https://api.acme.test/openai/v1", Model: "big-2", APIKey: "acme-secret",
		Style: "openai", Scheme: "https", Dial: "api.acme.test:443", Host: "api.acme.test", BasePath: "/openai/v1"}
	if len(big.Providers) != 1 || !sameProvider(withoutStats(big.Providers[0]), want) {
		t.Errorf("providers = %+v", big.Providers)
	}

	// Public fields as written; tollgate gone; missing required ones filled.
	pub := gjson.ParseBytes(big.Public)
	for path, want := range map[string]string{
		"created":                   "1720000000",
		"description":               `"A big model."`,
		"architecture.tokenizer":    `"Llama3"`,
		"architecture.modality":     `"text+image->text"`,
		"pricing.image":             `"0.0048"`,
		"pricing.prompt":            `"0.000003"`,
		"top_provider.is_moderated": "true",
		"supported_parameters":      `["temperature","seed"]`,
		"hugging_face_id":           `"acme/big"`,
		"canonical_slug":            `"acme/big"`,
		"per_request_limits":        "null",
		"supported_voices":          "null",
		"default_parameters":        "null",
		"links.details":             `"/api/v1/models/acme/big/endpoints"`,
	} {
		if got := pub.Get(path).Raw; got != want {
			t.Errorf("public %s = %s, want %s", path, got, want)
		}
	}
	if pub.Get("tollgate").Exists() || strings.Contains(string(big.Public), "secret") {
		t.Errorf("extension leaked: %s", big.Public)
	}
	small := gjson.ParseBytes(models[1].Public)
	for path, want := range map[string]string{
		"name":                               `"acme/small"`,
		"created":                            "1704067200",
		"context_length":                     "null",
		"architecture.input_modalities":      `["text"]`,
		"top_provider.is_moderated":          "false",
		"top_provider.context_length":        "null",
		"top_provider.max_completion_tokens": "null",
	} {
		if got := small.Get(path).Raw; got != want {
			t.Errorf("small %s = %s, want %s", path, got, want)
		}
	}
	if len(models[1].Providers) != 0 {
		t.Errorf("small providers = %v", models[1].Providers)
	}
}

func TestCatalogErrors(t *testing.T) {
	ok := PricingConfig{Prompt: "0", Completion: "0"}
	prov := func(p ProviderConfig) []ModelConfig {
		return []ModelConfig{{ID: "m", Pricing: ok, Providers: []ProviderConfig{p}}}
	}
	tests := []struct {
		name   string
		models []ModelConfig
		file   string
		want   string
	}{
		{"no id", []ModelConfig{{Pricing: ok}}, "", "model: id is required"},
		{"prompt missing", []ModelConfig{{ID: "m", Pricing: PricingConfig{Completion: "1"}}}, "", `model "m": pricing.prompt: required`},
		{"bad completion", []ModelConfig{{ID: "m", Pricing: PricingConfig{Prompt: "0", Completion: "-1"}}}, "", `model "m": pricing.completion: "-1": price must be`},
		{"bad request price", []ModelConfig{{ID: "m", Pricing: PricingConfig{Prompt: "0", Completion: "0", Request: "x"}}}, "", `model "m": pricing.request: "x"`},
		{"too precise", []ModelConfig{{ID: "m", Pricing: PricingConfig{Prompt: "0.0000000000000001", Completion: "0"}}}, "", `model "m": pricing.prompt:`},
		{"bad web_search", []ModelConfig{{ID: "m", Pricing: PricingConfig{Prompt: "0", Completion: "0", WebSearch: "1/2"}}}, "", `model "m": pricing.web_search:`},
		{"negative context", []ModelConfig{{ID: "m", Pricing: ok, ContextLength: -1}}, "", `model "m": context_length:`},
		{"duplicate", []ModelConfig{{ID: "m", Pricing: ok}, {ID: "m", Pricing: ok}}, "", `model "m": duplicate id`},
		{"duplicate of file", []ModelConfig{{ID: "f", Pricing: ok}}, `{"data":[{"id":"f","pricing":{"prompt":"0","completion":"0"}}]}`, `model "f": duplicate id`},
		{"provider no name", prov(ProviderConfig{BaseURL: "http://x"}), "", `model "m": provider "": name: required`},
		{"bad style", prov(ProviderConfig{Name: "p", BaseURL: "http://x", Style: "palm"}), "", `model "m": provider "p": style: unsupported "palm"`},
		{"bedrock no region", prov(ProviderConfig{Name: "p", BaseURL: "https://bedrock-runtime.us-east-1.amazonaws.com", APIKey: "AKID:s", Style: "bedrock"}), "", `model "m": provider "p": aws_region: required for style bedrock`},
		{"bedrock no key", prov(ProviderConfig{Name: "p", BaseURL: "https://bedrock-runtime.us-east-1.amazonaws.com", Style: "bedrock", Settings: map[string]string{"aws_region": "us-east-1"}}), "", `model "m": provider "p": api_key: required for style bedrock`},
		{"bad gemini auth", prov(ProviderConfig{Name: "p", BaseURL: "http://x", Style: "gemini", Settings: map[string]string{"auth": "oauth"}}), "", `model "m": provider "p": auth: expected api_key or service_account, got "oauth"`},
		{"bad api", prov(ProviderConfig{Name: "p", BaseURL: "http://x", API: "completions"}), "", `model "m": provider "p": api: unsupported "completions"`},
		{"no base_url", prov(ProviderConfig{Name: "p"}), "", `model "m": provider "p": base_url:`},
		{"ftp base_url", prov(ProviderConfig{Name: "p", BaseURL: "ftp://x/v1"}), "", `model "m": provider "p": base_url: expected an http or https URL`},
		{"no host", prov(ProviderConfig{Name: "p", BaseURL: "https:///v1"}), "", `model "m": provider "p": base_url:`},
		{"query", prov(ProviderConfig{Name: "p", BaseURL: "https://x/v1?a=1"}), "", `model "m": provider "p": base_url:`},
		{"relative", prov(ProviderConfig{Name: "p", BaseURL: "api.openai.com/v1"}), "", `model "m": provider "p": base_url:`},
		{"bad search_family", prov(ProviderConfig{Name: "p", BaseURL: "http://x", SearchFamily: "google"}), "", `model "m": provider "p": search_family: expected openai, anthropic, x or none`},
		{"bad system_messages", prov(ProviderConfig{Name: "p", BaseURL: "http://x", Style: "anthropic", SystemMessages: "merge"}), "", `model "m": provider "p": system_messages: expected pass or fold, got "merge"`},
		{"fold for chat", prov(ProviderConfig{Name: "p", BaseURL: "http://x", SystemMessages: "fold"}), "", `model "m": provider "p": system_messages: fold applies to style anthropic only`},
		{"azure no deployment", prov(ProviderConfig{Name: "p", BaseURL: "https://x.openai.azure.com", APIKey: "k", Style: "azure", Settings: map[string]string{"api_version": "2024-10-21"}}), "", `model "m": provider "p": deployment: required for style azure`},
		{"azure bad deployment", prov(ProviderConfig{Name: "p", BaseURL: "https://x.openai.azure.com", APIKey: "k", Style: "azure", Settings: map[string]string{"deployment": "a/../b", "api_version": "2024-10-21"}}), "", `model "m": provider "p": deployment: "a/../b" is not a deployment name`},
		{"azure no api_version", prov(ProviderConfig{Name: "p", BaseURL: "https://x.openai.azure.com", APIKey: "k", Style: "azure", Settings: map[string]string{"deployment": "gpt4o"}}), "", `model "m": provider "p": api_version: required for style azure`},
		{"azure bad api_version", prov(ProviderConfig{Name: "p", BaseURL: "https://x.openai.azure.com", APIKey: "k", Style: "azure", Settings: map[string]string{"deployment": "gpt4o", "api_version": "latest"}}), "", `model "m": provider "p": api_version: expected a date`},
		{"azure no key", prov(ProviderConfig{Name: "p", BaseURL: "https://x.openai.azure.com", Style: "azure", Settings: map[string]string{"deployment": "gpt4o", "api_version": "2024-10-21"}}), "", `model "m": provider "p": api_key: required for style azure`},
		{"setting of another style", prov(ProviderConfig{Name: "p", BaseURL: "http://x", Settings: map[string]string{"deployment": "gpt4o", "api_version": "2024-10-21"}}), "", `model "m": provider "p": `},
		{"file not json", nil, `{"data":[`, "not valid JSON"},
		{"file no data", nil, `[]`, `expected {"data": [models...]}`},
		{"file model not object", nil, `{"data":[1]}`, "data[0]: expected a model object"},
		{"file no id", nil, `{"data":[{"name":"x"}]}`, "data[0]: id: expected a non-empty string"},
		{"file numeric price", nil, `{"data":[{"id":"f","pricing":{"prompt":0.1,"completion":"0"}}]}`, `model "f": pricing.prompt: expected a decimal string`},
		{"file price missing", nil, `{"data":[{"id":"f","pricing":{"prompt":"0"}}]}`, `model "f": pricing.completion: expected a decimal string`},
		{"file no pricing", nil, `{"data":[{"id":"f"}]}`, `model "f": pricing.prompt: expected a decimal string`},
		{"file bad price", nil, `{"data":[{"id":"f","pricing":{"prompt":"abc","completion":"0"}}]}`, `model "f": pricing.prompt: "abc"`},
		{"file created float", nil, `{"data":[{"id":"f","created":1.5,"pricing":{"prompt":"0","completion":"0"}}]}`, `model "f": created: expected an integer`},
		{"file architecture string", nil, `{"data":[{"id":"f","architecture":"x","pricing":{"prompt":"0","completion":"0"}}]}`, `model "f": architecture: expected an object`},
		{"file modalities", nil, `{"data":[{"id":"f","architecture":{"input_modalities":"text"},"pricing":{"prompt":"0","completion":"0"}}]}`, `model "f": architecture.input_modalities: expected an array of strings`},
		{"file moderated", nil, `{"data":[{"id":"f","top_provider":{"is_moderated":"no"},"pricing":{"prompt":"0","completion":"0"}}]}`, `model "f": top_provider.is_moderated: expected a boolean`},
		{"file provider typo", nil, `{"data":[{"id":"f","pricing":{"prompt":"0","completion":"0"},"tollgate":{"providers":[{"name":"p","base_url":"http://x","apikey":"k"}]}}]}`, `model "f": tollgate: json: unknown field "apikey"`},
		{"file extension typo", nil, `{"data":[{"id":"f","pricing":{"prompt":"0","completion":"0"},"tollgate":{"provider":[]}}]}`, `model "f": tollgate: json: unknown field "provider"`},
		{"file provider bad url", nil, `{"data":[{"id":"f","pricing":{"prompt":"0","completion":"0"},"tollgate":{"providers":[{"name":"p","base_url":"x"}]}}]}`, `model "f": provider "p": base_url:`},
		{"file missing", nil, "-", "models_file: open"},
		{"override bad price", nil, `{"data":[{"id":"f","pricing":{"prompt":"0","completion":"0","overrides":[{"min_prompt_tokens":10,"prompt":"x"}]}}]}`, `model "f": pricing.overrides[0].prompt: "x"`},
		{"override bad clock", nil, `{"data":[{"id":"f","pricing":{"prompt":"0","completion":"0","overrides":[{"prompt":"1"},{"utc_start":170,"prompt":"1"}]}}]}`, `model "f": pricing.overrides[0]: has no condition`},
		{"override bad window", nil, `{"data":[{"id":"f","pricing":{"prompt":"0","completion":"0","overrides":[{"utc_start":170,"utc_end":300,"prompt":"1"}]}}]}`, `model "f": pricing.overrides[0].utc_start: 170: expected an HHMM clock number`},
		{"override no price", []ModelConfig{{ID: "m", Pricing: PricingConfig{Prompt: "0", Completion: "0", Overrides: []PricingOverrideConfig{{MinPromptTokens: new(float64(5))}}}}}, "", `model "m": pricing.overrides[0]: sets no price`},
		{"override not array", nil, `{"data":[{"id":"f","pricing":{"prompt":"0","completion":"0","overrides":{}}}]}`, `model "f": pricing.overrides: expected an array of pricing overrides`},
		{"override negative threshold", []ModelConfig{{ID: "m", Pricing: PricingConfig{Prompt: "0", Completion: "0", Overrides: []PricingOverrideConfig{{MinPromptTokens: new(float64(-1)), Prompt: "1"}}}}}, "", `model "m": pricing.overrides[0].min_prompt_tokens: expected a non-negative number`},
		{"unknown tokenizer", []ModelConfig{{ID: "openai/gpt-x", Pricing: ok, Tokenizer: "gpt2"}}, "", `model "openai/gpt-x": tokenizer: unknown tokenizer "gpt2" (expected o200k_base, cl100k_base or bytes)`},
		{"file unknown tokenizer", nil, `{"data":[{"id":"f","pricing":{"prompt":"0","completion":"0"},"tollgate":{"tokenizer":"llama9"}}]}`, `model "f": tokenizer: unknown tokenizer "llama9"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := &App{DataDir: t.TempDir(), Models: tt.models}
			switch tt.file {
			case "":
			case "-":
				app.ModelsFile = filepath.Join(t.TempDir(), "missing.json")
			default:
				app.ModelsFile = filepath.Join(t.TempDir(), "models.json")
				if err := os.WriteFile(app.ModelsFile, []byte(tt.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			err := app.Provision(appContext(t))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Provision = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestProviderKeyNeverInErrors(t *testing.T) {
	t.Setenv("TOLLGATE_TEST_URL", "https://user:s3cret@example.test/v1")
	app := &App{DataDir: t.TempDir(), Models: []ModelConfig{{ID: "m", Pricing: PricingConfig{Prompt: "0", Completion: "0"},
		Providers: []ProviderConfig{{Name: "p", BaseURL: "{env.TOLLGATE_TEST_URL}", APIKey: "sk-abc"}}}}}
	err := app.Provision(appContext(t))
	if err == nil || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "sk-abc") ||
		!strings.Contains(err.Error(), "{env.TOLLGATE_TEST_URL}") {
		t.Fatalf("Provision = %v, want the URL as configured and no secret", err)
	}
}

func TestProviderDerivedFields(t *testing.T) {
	t.Setenv("TOLLGATE_TEST_HOST", "llm.internal")
	tests := []struct {
		base                        string
		scheme, dial, host, basePth string
	}{
		{"http://127.0.0.1:8081/v1", "http", "127.0.0.1:8081", "127.0.0.1:8081", "/v1"},
		{"https://api.openai.com/v1/", "https", "api.openai.com:443", "api.openai.com", "/v1"},
		{"http://example.test", "http", "example.test:80", "example.test", ""},
		{"https://example.test/", "https", "example.test:443", "example.test", ""},
		{"https://example.test:8443/a/b//", "https", "example.test:8443", "example.test:8443", "/a/b"},
		{"http://[::1]:9000/v1", "http", "[::1]:9000", "[::1]:9000", "/v1"},
		{"http://[::1]/v1", "http", "[::1]:80", "[::1]", "/v1"},
		{"https://{env.TOLLGATE_TEST_HOST}/openai/v1", "https", "llm.internal:443", "llm.internal", "/openai/v1"},
		{"https://example.test/my%20api/v1", "https", "example.test:443", "example.test", "/my%20api/v1"},
	}
	for _, tt := range tests {
		p := &catalog.Provider{Name: "p", BaseURL: tt.base}
		if err := provisionProvider(p, "m", caddy.NewReplacer()); err != nil {
			t.Errorf("%s: %v", tt.base, err)
			continue
		}
		if p.Scheme != tt.scheme || p.Dial != tt.dial || p.Host != tt.host || p.BasePath != tt.basePth || p.Model != "m" || p.Style != "openai" {
			t.Errorf("%s: scheme %q dial %q host %q base path %q model %q style %q", tt.base, p.Scheme, p.Dial, p.Host, p.BasePath, p.Model, p.Style)
		}
	}
}

func TestMissingEnvKeyLeavesProviderKeyless(t *testing.T) {
	app := provisioned(t, &App{Models: []ModelConfig{{ID: "m", Pricing: PricingConfig{Prompt: "0", Completion: "0"},
		Providers: []ProviderConfig{{Name: "p", BaseURL: "http://x", APIKey: "{env.TOLLGATE_TEST_UNSET_VARIABLE}"}}}}})
	m, _ := app.Catalog().Lookup("m")
	if m.Providers[0].APIKey != "" {
		t.Errorf("api_key = %q, want empty", m.Providers[0].APIKey)
	}
}

func TestCatalogReloadIsStable(t *testing.T) {
	cfg := `	tollgate {
		model a {
			pricing {
				prompt 0.000001
				completion 0.000002
			}
		}
	}`
	first := provisioned(t, adaptApp(t, cfg)).Catalog().Models()[0].Public
	second := provisioned(t, adaptApp(t, cfg)).Catalog().Models()[0].Public
	if string(first) != string(second) {
		t.Errorf("public object changed across loads:\n%s\n%s", first, second)
	}
}

func TestModelCaddyfileErrors(t *testing.T) {
	tests := []struct{ global, want string }{
		{"tollgate {\n model\n}", "wrong argument count"},
		{"tollgate {\n model a b\n}", "wrong argument count"},
		{"tollgate {\n model a {\n colour red\n }\n}", `unrecognized model option "colour"`},
		{"tollgate {\n model a {\n context_length 0\n }\n}", "context_length: expected a positive integer"},
		{"tollgate {\n model a {\n max_completion_tokens x\n }\n}", "max_completion_tokens: expected a positive integer"},
		{"tollgate {\n model a {\n pricing {\n image 1\n }\n }\n}", `unrecognized pricing option "image"`},
		{"tollgate {\n model a {\n pricing {\n prompt\n }\n }\n}", "wrong argument count"},
		{"tollgate {\n model a {\n provider p\n }\n}", "wrong argument count"},
		{"tollgate {\n model a {\n provider p http://x extra\n }\n}", "wrong argument count"},
		{"tollgate {\n model a {\n provider p http://x {\n key k\n }\n }\n}", `unrecognized provider option "key"`},
		{"tollgate {\n model a {\n pricing {\n prompt 0\n completion 0\n }\n provider p http://x {\n system_messages fold\n }\n }\n}", "system_messages: fold applies to style anthropic only"},
		{"tollgate {\n model a {\n pricing {\n prompt 0\n completion 0\n }\n provider p http://x {\n style anthropic\n system_messages merge\n }\n }\n}", `system_messages: expected pass or fold, got "merge"`},
		{"tollgate {\n models_file\n}", "wrong argument count"},
		{"tollgate {\n in_flight {\n fraction 0\n }\n}", "in_flight: fraction: expected a decimal in (0, 1]"},
		{"tollgate {\n in_flight {\n fraction 1.5\n }\n}", "in_flight: fraction: expected a decimal in (0, 1]"},
		{"tollgate {\n in_flight {\n ceiling -1\n }\n}", "in_flight: ceiling: expected a non-negative decimal amount"},
		{"tollgate {\n in_flight {\n settlement_window soon\n }\n}", "settlement_window: invalid duration"},
		{"tollgate {\n in_flight {\n burst 3\n }\n}", `unrecognized in_flight option "burst"`},
		{"tollgate {\n in_flight x\n}", "wrong argument count"},
	}
	for _, tt := range tests {
		caddyfile := "{\n" + tt.global + "\n}\n\n:8080 {\n\ttollgate\n}\n"
		_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want %q", tt.global, err, tt.want)
		}
	}
}

func TestInFlightCaddyfile(t *testing.T) {
	app := provisioned(t, adaptApp(t, `	tollgate {
		in_flight {
			fraction 0.25
			ceiling 20
			per_request_cap 1.5
			settlement_window 30s
			balance_threshold 200
			established_usage 1000
		}
	}`))
	want := InFlightConfig{Fraction: "0.25", Ceiling: "20", PerRequestCap: "1.5", SettlementWindow: caddy.Duration(30 * time.Second),
		BalanceThreshold: "200", EstablishedUsage: "1000"}
	if app.InFlight == nil || *app.InFlight != want {
		t.Fatalf("in_flight = %+v", app.InFlight)
	}
	p := app.InFlightPolicy()
	if p.FractionPPM != 250_000 || p.Ceiling != 20*money.AmountScale || p.PerRequestCap != 1_500_000_000 ||
		p.SettlementWindow != 30*time.Second || p.BalanceThreshold != 200*money.AmountScale || p.EstablishedUsage != 1000*money.AmountScale {
		t.Errorf("policy = %+v", p)
	}
	if got := adaptApp(t, "\ttollgate {\n\t\tmodels_file /etc/tollgate/models.json\n\t}").ModelsFile; got != "/etc/tollgate/models.json" {
		t.Errorf("models_file = %q", got)
	}
}

func TestInFlightValidate(t *testing.T) {
	tests := []struct {
		cfg  InFlightConfig
		want string // "" for valid
	}{
		{InFlightConfig{}, ""},
		{InFlightConfig{Fraction: "1", Ceiling: "0", PerRequestCap: "0.000000001", EstablishedUsage: "0"}, ""},
		{InFlightConfig{Fraction: "0.000001"}, ""},
		{InFlightConfig{Fraction: "0"}, "in_flight: fraction:"},
		{InFlightConfig{Fraction: "1.000001"}, "in_flight: fraction:"},
		{InFlightConfig{Fraction: "0.0000001"}, "in_flight: fraction:"},
		{InFlightConfig{Fraction: "half"}, "in_flight: fraction:"},
		{InFlightConfig{Ceiling: "-0.5"}, "in_flight: ceiling:"},
		{InFlightConfig{PerRequestCap: "x"}, "in_flight: per_request_cap:"},
		{InFlightConfig{BalanceThreshold: "1e400"}, "in_flight: balance_threshold:"},
		{InFlightConfig{EstablishedUsage: "-1"}, "in_flight: established_usage:"},
		{InFlightConfig{SettlementWindow: -1}, "in_flight: settlement_window:"},
	}
	for _, tt := range tests {
		cfg := tt.cfg
		err := (&App{InFlight: &cfg}).Validate()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%+v: Validate = %v, want %q", tt.cfg, err, tt.want)
		}
	}
}

func TestCatalogCachePricesAndAnthropicStyle(t *testing.T) {
	app := provisioned(t, adaptApp(t, `	tollgate {
		model anthropic/claude {
			pricing {
				prompt 0.000003
				completion 0.000015
				input_cache_read 0.0000003
				input_cache_write 0.00000375
			}
			provider anthropic https://api.anthropic.com {
				model claude-sonnet-4-5
				api_key sk-ant
				style anthropic
			}
		}
		model plain {
			pricing {
				prompt 0.000001
				completion 0.000002
			}
		}
	}`))
	models := app.Catalog().Models()
	m := models[0]
	want := billing.Pricing{Prompt: price(t, "0.000003"), Completion: price(t, "0.000015"),
		InputCacheRead: price(t, "0.0000003"), InputCacheWrite: price(t, "0.00000375"), CacheReadSet: true, CacheWriteSet: true}
	if m.Pricing != want {
		t.Errorf("pricing %+v", m.Pricing)
	}
	if p := m.Providers[0]; !p.D().Native(dialect.Messages) || !p.ChatOnly() || p.BasePath != "" {
		t.Errorf("provider %+v", p)
	}
	pub := gjson.ParseBytes(m.Public)
	if pub.Get("pricing.input_cache_read").Str != "0.0000003" || pub.Get("pricing.input_cache_write").Str != "0.00000375" {
		t.Errorf("public pricing %s", pub.Get("pricing").Raw)
	}
	if pub := gjson.ParseBytes(models[1].Public); pub.Get("pricing.input_cache_read").Exists() || models[1].Pricing.CacheReadSet {
		t.Errorf("unset cache prices shown: %s", pub.Get("pricing").Raw)
	}
}

// The hour's cache-write price and the conditional prices are read from
// the Caddyfile and from models_file, and shown as the public API shows
// them.
func TestCatalogHourCachePriceAndOverrides(t *testing.T) {
	path := filepath.Join(t.TempDir(), "models.json")
	file := `{"data":[{"id":"acme/long","pricing":{"prompt":"0.000003","completion":"0.000015","input_cache_write_1h":"0.000006",
		"overrides":[{"min_prompt_tokens":200000,"prompt":"0.000006","completion":"0.0000225","audio":"1"}]}}]}`
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	app := adaptApp(t, `	tollgate {
		model anthropic/claude {
			pricing {
				prompt 0.000003
				completion 0.000015
				input_cache_write 0.00000375
				input_cache_write_1h 0.000006
				override {
					min_prompt_tokens 200000
					prompt 0.000006
				}
				override {
					utc_start 2300
					utc_end 600
					completion 0.00001
				}
			}
		}
	}`)
	app.ModelsFile = path
	models := provisioned(t, app).Catalog().Models()
	for i, m := range models {
		ov := m.Pricing.Overrides
		if !m.Pricing.CacheWrite1hSet || m.Pricing.InputCacheWrite1h != price(t, "0.000006") || ov == nil || !ov.Entries[0].HasMinPrompt || ov.Entries[0].MinPromptTokens != 200000 {
			t.Fatalf("model %d: pricing %+v", i, m.Pricing)
		}
	}
	file0 := gjson.ParseBytes(models[0].Public)
	if got := file0.Get("pricing.overrides").Raw; got != `[{"min_prompt_tokens":200000,"prompt":"0.000006","completion":"0.0000225","audio":"1"}]` {
		t.Errorf("models_file overrides served as %s", got)
	}
	pub := gjson.ParseBytes(models[1].Public)
	if got, want := pub.Get("pricing.overrides").Raw, `[{"prompt":"0.000006","min_prompt_tokens":200000},{"completion":"0.00001","utc_start":2300,"utc_end":600}]`; got != want {
		t.Errorf("overrides %s, want %s", got, want)
	}
	if pub.Get("pricing.input_cache_write_1h").Str != "0.000006" {
		t.Errorf("public pricing %s", pub.Get("pricing").Raw)
	}
	if e := models[1].Pricing.Overrides.Entries[1]; !e.HasWindow || e.UTCStart != 23*60 || e.UTCEnd != 6*60 {
		t.Errorf("window %+v", e)
	}
}

// Models count with the tokenizer named, else their author's: OpenAI's
// with o200k_base, the others by the byte bound.
func TestCatalogTokenizers(t *testing.T) {
	app := provisioned(t, adaptApp(t, `	tollgate {
		model openai/gpt-4o {
			pricing {
				prompt 0
				completion 0
			}
		}
		model openai/gpt-4 {
			tokenizer cl100k_base
			pricing {
				prompt 0
				completion 0
			}
		}
		model openai/gpt-oss {
			tokenizer bytes
			pricing {
				prompt 0
				completion 0
			}
		}
		model meta/llama {
			pricing {
				prompt 0
				completion 0
			}
		}
		model acme/gpt-clone {
			tokenizer o200k_base
			pricing {
				prompt 0
				completion 0
			}
		}
	}`))
	cat, err := app.loadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"openai/gpt-4o": "o200k_base", "openai/gpt-4": "cl100k_base",
		"openai/gpt-oss": "bytes", "meta/llama": "bytes", "acme/gpt-clone": "o200k_base"} {
		m, _ := cat.Lookup(id)
		got := "bytes"
		if m.Tokenizer != nil {
			got = m.Tokenizer.Name()
		}
		if got != want {
			t.Errorf("%s: tokenizer %s, want %s", id, got, want)
		}
	}
}

// sameProvider compares the exported fields of two providers: the
// unexported ones are what catalog.New derives from them.
// The dialect module, which the dialect checked, is left out.
func sameProvider(a, b catalog.Provider) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := range va.NumField() {
		if f := va.Type().Field(i); f.IsExported() && f.Name != "Module" && !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			return false
		}
	}
	return true
}

// withoutStats is p without its measurements (the catalog's registry).
func withoutStats(p *catalog.Provider) catalog.Provider {
	c := *p
	c.Stats, c.Breaker, c.Dialect = nil, nil, nil
	return c
}

// appContext is a context for provisioning an app outside a running
// Caddy: one that loads guest modules (the providers' dialects).
func appContext(t *testing.T) caddy.Context {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	return ctx
}

// The prices per item (a rerank search unit or document, an image) are
// read from a model block and a provider's pricing, which inherits
// them, and shown in the public pricing; a model priced per image lists
// image output.
func TestCatalogItemPrices(t *testing.T) {
	app := provisioned(t, adaptApp(t, `	tollgate {
		model cohere/rerank-v3.5 {
			pricing {
				prompt 0
				completion 0
				search_unit 0.002
			}
			provider cohere https://api.cohere.com/v2 {
				api_key k
				pricing {
					prompt 0
					completion 0
					document 0.0001
				}
			}
		}
		model openai/gpt-image-1 {
			pricing {
				prompt 0
				completion 0
				image_output 0.04
			}
		}
	}`))
	models := app.Catalog().Models()
	rr, img := models[0], models[1]
	if rr.Pricing.SearchUnit != price(t, "0.002") || rr.Pricing.Document != 0 {
		t.Errorf("rerank pricing %+v", rr.Pricing)
	}
	if p := rr.Providers[0].Pricing; p == nil || p.SearchUnit != price(t, "0.002") || p.Document != price(t, "0.0001") {
		t.Errorf("provider pricing %+v", p)
	}
	pub := gjson.ParseBytes(rr.Public)
	if pub.Get("pricing.search_unit").Str != "0.002" || pub.Get("pricing.image_output").Exists() {
		t.Errorf("public rerank pricing %s", pub.Get("pricing").Raw)
	}
	pub = gjson.ParseBytes(img.Public)
	if pub.Get("pricing.image_output").Str != "0.04" || pub.Get("architecture.output_modalities").Raw != `["image"]` {
		t.Errorf("public image model %s", pub.Raw)
	}
}

// The audio routes' prices (a character spoken, a second transcribed)
// are read from a model block, inherited by a provider's pricing and
// shown in the public pricing.
func TestCatalogAudioPrices(t *testing.T) {
	app := provisioned(t, adaptApp(t, `	tollgate {
		model openai/tts-1 {
			pricing {
				prompt 0
				completion 0
				character 0.000015
			}
			provider openai https://api.openai.com/v1 {
				api_key k
				pricing {
					prompt 0
					completion 0
					audio_second 0.0001
				}
			}
		}
	}`))
	m := app.Catalog().Models()[0]
	if m.Pricing.Character != price(t, "0.000015") || m.Pricing.AudioSecond != 0 {
		t.Errorf("model pricing %+v", m.Pricing)
	}
	if p := m.Providers[0].Pricing; p == nil || p.Character != price(t, "0.000015") || p.AudioSecond != price(t, "0.0001") {
		t.Errorf("provider pricing %+v", p)
	}
	pub := gjson.ParseBytes(m.Public)
	if pub.Get("pricing.character").Str != "0.000015" || pub.Get("pricing.audio_second").Exists() {
		t.Errorf("public pricing %s", pub.Get("pricing").Raw)
	}
}
