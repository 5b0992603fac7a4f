package testgw

import (
	"encoding/json"

	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
)

// The fixture catalog: model "m", priced per token, served by provider
// "up" under another model id.
const (
	UpstreamName  = "up"
	UpstreamHost  = "upstream.test:8080"
	UpstreamModel = "m-upstream"
	UpstreamKey   = "sk-upstream"
)

// Pricing is model "m"'s price: 0.000001 per prompt token, 0.000002 per
// completion token.
var Pricing = billing.Pricing{Prompt: Price("0.000001"), Completion: Price("0.000002")}

// Price parses s; it panics on a malformed price.
func Price(s string) billing.Price {
	p, err := billing.ParsePrice(s)
	if err != nil {
		panic(err)
	}
	return p
}

// Provider is a provisioned provider as caddymodule derives it.
func Provider(name, scheme, host, dial, basePath, model, key string) *catalog.Provider {
	return &catalog.Provider{Name: name, BaseURL: scheme + "://" + host + basePath, Model: model, APIKey: key, Style: "openai",
		Scheme: scheme, Dial: dial, Host: host, BasePath: basePath}
}

// Model is a catalog model whose public object is the shape the tollgate
// app builds for a configured model.
func Model(id string, prompt billing.Price, providers ...*catalog.Provider) *catalog.Model {
	pub := map[string]any{
		"id": id, "canonical_slug": id, "name": id, "created": 1704067200, "description": "",
		"context_length": 8192,
		"architecture": map[string]any{"modality": "text->text", "input_modalities": []string{"text"},
			"output_modalities": []string{"text"}, "tokenizer": "Other", "instruct_type": nil},
		"pricing":              map[string]string{"prompt": prompt.String(), "completion": "0", "request": "0", "web_search": "0"},
		"top_provider":         map[string]any{"context_length": 8192, "is_moderated": false, "max_completion_tokens": nil},
		"per_request_limits":   nil,
		"supported_parameters": []string{"max_tokens", "temperature"},
		"supported_voices":     nil,
		"default_parameters":   nil,
		"links":                map[string]string{"details": "/api/v1/models/" + id + "/endpoints"},
	}
	b, err := json.Marshal(pub)
	if err != nil {
		panic(err)
	}
	return &catalog.Model{ID: id, Name: id, ContextLength: 8192, Pricing: billing.Pricing{Prompt: prompt},
		Providers: providers, Public: b}
}

// PricedModel is a catalog model with the given pricing, its public object
// showing that pricing.
func PricedModel(id string, pricing billing.Pricing, providers ...*catalog.Provider) *catalog.Model {
	m := Model(id, pricing.Prompt, providers...)
	m.Pricing = pricing
	pub, err := sjson.SetBytes(m.Public, "pricing.completion", pricing.Completion.String())
	if err != nil {
		panic(err)
	}
	m.Public = pub
	return m
}

// UpstreamProvider is the fixture's provider, under basePath.
func UpstreamProvider(basePath string) *catalog.Provider {
	return Provider(UpstreamName, "http", UpstreamHost, UpstreamHost, basePath, UpstreamModel, UpstreamKey)
}

// Catalog holds model "m" on the fixture's provider under basePath, then
// extra.
func Catalog(basePath string, extra ...*catalog.Model) *catalog.Catalog {
	return catalog.New(append([]*catalog.Model{PricedModel("m", Pricing, UpstreamProvider(basePath))}, extra...))
}

// RoutedCatalog: "paid" on an https provider under another id, "mock" on
// a plain-http provider under its own id, "keyless" and "bare" with no
// usable provider, "second" whose first provider has no key.
func RoutedCatalog() *catalog.Catalog {
	return catalog.New([]*catalog.Model{
		Model("paid", 1000, Provider("openai", "https", "api.openai.test", "api.openai.test:443", "/v1", "gpt-x-2025", "sk-openai")),
		Model("mock", 0, Provider("mock", "http", "127.0.0.1:8081", "127.0.0.1:8081", "/v1", "mock", "mock-key")),
		Model("keyless", 0, Provider("byok-only", "https", "byok.test", "byok.test:443", "", "keyless", "")),
		Model("bare", 0),
		Model("second", 0,
			Provider("first", "https", "one.test", "one.test:443", "/v1", "second", ""),
			Provider("fallback", "http", "two.test:8000", "two.test:8000", "", "second-up", "key-2")),
	})
}
