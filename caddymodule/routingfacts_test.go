package caddymodule

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/dialect/anthropic"
	"github.com/tollgate-dev/caddy-tollgate/dialect/openai"
)

// The routing facts of a provider (quantization, supported parameters, its
// own pricing) and of a model (distillable) from the Caddyfile.
func TestProviderRoutingFactsFromCaddyfile(t *testing.T) {
	app := provisioned(t, adaptApp(t, `	tollgate {
		model acme/m {
			pricing {
				prompt 0.000001
				completion 0.000002
				web_search 0.004
			}
			distillable_text
			provider plain http://127.0.0.1:1/v1
			provider fast http://127.0.0.1:2/v1 {
				quantization fp8
				supported_parameters max_tokens temperature seed
				pricing {
					prompt 0.000003
					completion 0.000006
					request 0.01
				}
			}
			provider claude http://127.0.0.1:3/v1 {
				style anthropic
			}
		}
	}`))
	m, ok := app.Catalog().Lookup("acme/m")
	if !ok || len(m.Providers) != 3 || !m.Distillable {
		t.Fatalf("model = %+v", m)
	}
	plain, fast, claude := m.Providers[0], m.Providers[1], m.Providers[2]
	if plain.Quantization != "" || plain.Pricing != nil || m.For(plain) != m || !slices.Equal(plain.Parameters(), openai.Parameters) {
		t.Errorf("plain: %+v", plain)
	}
	// Its own request price; the model's web search price, which it does
	// not set.
	want := billing.Pricing{Prompt: price(t, "0.000003"), Completion: price(t, "0.000006"), Request: price(t, "0.01"), WebSearch: price(t, "0.004")}
	if fast.Quantization != "fp8" || fast.Pricing == nil || *fast.Pricing != want || m.For(fast).Pricing != want ||
		m.For(fast).ID != "acme/m" || !slices.Equal(fast.Parameters(), []string{"max_tokens", "temperature", "seed"}) {
		t.Errorf("fast: %+v", fast)
	}
	if !slices.Equal(claude.Parameters(), anthropic.Parameters) {
		t.Errorf("claude parameters %v", claude.Parameters())
	}
	if plain.Stats == nil || plain.Stats == fast.Stats {
		t.Error("each endpoint has its own measurements")
	}
	// The public list's supported_parameters: any provider's (the
	// Anthropic-style one adds top_k and reasoning, which the OpenAI
	// dialect's defaults leave out).
	params := gjson.GetBytes(m.Public, "supported_parameters").Array()
	if len(params) != len(openai.Parameters)+2 || params[len(params)-2].Str != "top_k" || params[len(params)-1].Str != "reasoning" {
		t.Errorf("supported_parameters %v", params)
	}
}

func TestProviderRoutingFactsFromModelsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "models.json")
	file := `{"data":[{"id":"acme/f","pricing":{"prompt":"0.000001","completion":"0.000002","request":"0.5"},"tollgate":{"distillable_text":true,"providers":[
		{"name":"a","base_url":"http://127.0.0.1:1/v1","quantization":"bf16","supported_parameters":["tools"],"pricing":{"prompt":"0.0000005","completion":"0.000001"}}]}}]}`
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	app := provisioned(t, &App{ModelsFile: path})
	m, _ := app.Catalog().Lookup("acme/f")
	p := m.Providers[0]
	if !m.Distillable || p.Quantization != "bf16" || !slices.Equal(p.Parameters(), []string{"tools"}) ||
		m.For(p).Pricing.Prompt != price(t, "0.0000005") || m.For(p).Pricing.Request != price(t, "0.5") {
		t.Errorf("model %+v provider %+v", m, p)
	}
}

func TestProviderRoutingFactsErrors(t *testing.T) {
	ok := PricingConfig{Prompt: "0", Completion: "0"}
	for _, tt := range []struct {
		p    ProviderConfig
		want string
	}{
		{ProviderConfig{Quantization: "fp7"}, `model "m": provider "p": quantization: expected one of int4,`},
		{ProviderConfig{SupportedParameters: []string{"tools", "telepathy"}}, `model "m": provider "p": supported_parameters: unknown parameter "telepathy"`},
		{ProviderConfig{Pricing: &PricingConfig{Prompt: "1"}}, `model "m": provider "p": pricing.completion: required`},
		{ProviderConfig{Pricing: &PricingConfig{Prompt: "-1", Completion: "0"}}, `model "m": provider "p": pricing.prompt:`},
	} {
		tt.p.Name, tt.p.BaseURL = "p", "http://127.0.0.1:1/v1"
		app := &App{DataDir: t.TempDir(), Models: []ModelConfig{{ID: "m", Pricing: ok, Providers: []ProviderConfig{tt.p}}}}
		if err := app.Provision(appContext(t)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: Provision = %v, want %q", tt.p, err, tt.want)
		}
	}
	for _, tt := range []struct{ block, want string }{
		{"quantization", "wrong argument count"},
		{"quantization fp7", `provider "p": quantization: expected one of`},
		{"supported_parameters", "wrong argument count"},
		{"supported_parameters tools nope", `supported_parameters: unknown parameter "nope"`},
		{"pricing {\n prompt 1\n }", `provider "p": pricing.completion: required`},
		{"pricing {\n tip 1\n }", `unrecognized pricing option "tip"`},
	} {
		caddyfile := "{\n tollgate {\n model m {\n provider p http://x {\n " + tt.block + "\n }\n }\n }\n}\n\n:8080 {\n\ttollgate\n}\n"
		_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want %q", tt.block, err, tt.want)
		}
	}
	caddyfile := "{\n tollgate {\n model m {\n distillable_text yes\n }\n }\n}\n\n:8080 {\n\ttollgate\n}\n"
	if _, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil); err == nil || !strings.Contains(err.Error(), "wrong argument count") {
		t.Errorf("distillable_text yes: %v", err)
	}
	for opt, want := range map[string]string{"load_balancing random": "load_balancing: expected price or ordered", "load_balancing": "load_balancing: expected price or ordered"} {
		caddyfile := ":8080 {\n\ttollgate {\n\t\t" + opt + "\n\t}\n}\n"
		if _, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", opt, err)
		}
	}
	caddyfile = ":8080 {\n\ttollgate {\n\t\tload_balancing ordered\n\t}\n}\n"
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
	if err != nil || !strings.Contains(string(out), `"load_balancing":"ordered"`) {
		t.Errorf("load_balancing ordered: %v %s", err, out)
	}
}
