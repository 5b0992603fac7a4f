package caddymodule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/dialect/anthropic"
	"github.com/tollgate-dev/caddy-tollgate/dialect/openai"
	"github.com/tollgate-dev/caddy-tollgate/handlers"
	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
	"github.com/tollgate-dev/caddy-tollgate/tokenizer"
)

// ModelConfig is one model of the catalog as written in the app's config.
type ModelConfig struct {
	// ID is the public model id clients send, e.g. "openai/gpt-4o".
	ID string `json:"id"`
	// Name is the display name. Default: the id.
	Name string `json:"name,omitempty"`
	// ContextLength is the context window in tokens; 0: unknown (null).
	ContextLength int64 `json:"context_length,omitempty"`
	// MaxCompletionTokens bounds one answer; 0: unknown (null).
	MaxCompletionTokens int64 `json:"max_completion_tokens,omitempty"`
	// Pricing is what a request costs, in credits.
	Pricing PricingConfig `json:"pricing"`
	// Providers serve the model, ranked per request (the router's
	// provider preferences and load balancing).
	Providers []ProviderConfig `json:"providers,omitempty"`
	// Tokenizer is how the model counts tokens: o200k_base, cl100k_base,
	// or bytes (unknown: a token per byte bounds the prompt). Default:
	// o200k_base for openai/ models, bytes for the others.
	Tokenizer string `json:"tokenizer,omitempty"`
	// Moderation: every request for the model passes the operator's
	// moderation provider first (the app's moderation block).
	Moderation bool `json:"moderation,omitempty"`
	// DistillableText: the model's author allows its text output to train
	// other models (a request's provider.enforce_distillable_text).
	DistillableText bool `json:"distillable_text,omitempty"`
}

// tokenizerBytes names the byte bound: the model's tokenizer is unknown.
const tokenizerBytes = "bytes"

// modelTokenizer is the encoding named for the model id, or its author's
// default; nil for bytes.
func modelTokenizer(id, name string) (*tokenizer.Encoding, error) {
	if name == "" {
		if !strings.HasPrefix(id, "openai/") {
			return nil, nil
		}
		name = tokenizer.O200kBase
	}
	if name == tokenizerBytes {
		return nil, nil
	}
	e, err := tokenizer.Get(name)
	if err != nil {
		return nil, fmt.Errorf("model %q: tokenizer: %v (expected %s or %s)", id, err, strings.Join(tokenizer.Names(), ", "), tokenizerBytes)
	}
	return e, nil
}

// ProviderConfig is one upstream endpoint of a model, in the app's config
// and in the "tollgate" extension of models_file.
type ProviderConfig struct {
	// Name identifies the provider ("openai", "mock").
	Name string `json:"name"`
	// BaseURL is the provider's API root, e.g. https://api.openai.com/v1.
	BaseURL string `json:"base_url"`
	// Model is the provider's id for the model. Default: the model's id.
	Model string `json:"model,omitempty"`
	// SearchFamily overrides the native web search family the model id's
	// vendor implies: openai, anthropic, x, or none.
	SearchFamily string `json:"search_family,omitempty"`
	// APIKey is the operator's key, usually a placeholder such as
	// {env.OPENAI_API_KEY}, expanded at provision time.
	APIKey string `json:"api_key,omitempty"`
	// DialectRaw is the provider's API dialect, a module of namespace
	// tollgate.dialects named by its style, with its own options:
	// {"style": "azure", "deployment": ..., "api_version": ...}. Styles:
	// "openai" (the default), "anthropic" (Anthropic's Messages API at
	// <base_url>/v1/messages), "azure" (an Azure OpenAI deployment),
	// "gemini", "bedrock", or any other registered dialect.
	DialectRaw json.RawMessage `json:"dialect,omitempty" caddy:"namespace=tollgate.dialects inline_key=style"`
	// Style and Settings are the older form of DialectRaw: the dialect's
	// style and its options, read as {"style": Style, Settings...}.
	Style string `json:"style,omitempty"`
	// API is the generation API the provider speaks: "responses" (the
	// default: Chat Completions and Responses, each passed through) or
	// "chat" (Chat Completions only: the gateway translates Responses
	// requests and answers).
	API string `json:"api,omitempty"`
	// MaxTokensField is the output limit field the provider takes on chat
	// completions: "max_tokens" (the default) or "max_completion_tokens"
	// (OpenAI's newer models refuse max_tokens); the gateway renames the
	// client's max_tokens to it.
	MaxTokensField string            `json:"max_tokens_field,omitempty"`
	Settings       map[string]string `json:"settings,omitempty"`
	// dialect is DialectRaw as the app loaded it (loadDialect).
	dialect dialect.Module

	// Data-policy facts, which guardrails' data-policy fields are decided
	// from. The defaults assume the least, so that a provider the operator
	// says nothing about meets no data-policy requirement.

	// ZDR: the provider retains no prompt or answer (zero data retention),
	// hence neither collects nor publishes them.
	ZDR bool `json:"zdr,omitempty"`
	// DataCollection: "allow" (the default: the provider may train on or
	// retain prompts) or "deny".
	DataCollection string `json:"data_collection,omitempty"`
	// Publication: "allow" (the default: the provider may publish
	// prompts) or "deny".
	Publication string `json:"publication,omitempty"`
	// Region is where the provider processes requests: "global" (the
	// default), "europe" or "us".
	Region string `json:"region,omitempty"`

	// Quantization is the numeric format the provider runs the model in:
	// int4, int8, fp4, mxfp4, nvfp4, fp6, fp8, mxfp8, fp16, bf16, fp32 or
	// unknown (the default).
	Quantization string `json:"quantization,omitempty"`
	// SupportedParameters are the request parameters the provider takes
	// (a request's provider.require_parameters); default: its dialect's.
	SupportedParameters []string `json:"supported_parameters,omitempty"`
	// SystemMessages is what an Anthropic-style provider gets of the
	// system messages inside a Messages request's messages: "pass" (the
	// default: as they are, with the mid-conversation-system beta) or
	// "fold" (into the top-level system, for a provider without that
	// beta).
	SystemMessages string `json:"system_messages,omitempty"`
	// Pricing is the provider's own price for the model when it differs
	// from the model's; requests it serves are charged at it.
	Pricing *PricingConfig `json:"pricing,omitempty"`

	// DialTimeout, ResponseHeaderTimeout and FirstByteTimeout override
	// the gateway's upstream timeouts for this provider (a slow
	// self-hosted model, a provider that thinks long before it answers):
	// opening a connection (at most 1m), the headers of an answer that
	// is not a stream, and the first byte of a stream.
	DialTimeout           caddy.Duration `json:"dial_timeout,omitempty"`
	ResponseHeaderTimeout caddy.Duration `json:"response_header_timeout,omitempty"`
	FirstByteTimeout      caddy.Duration `json:"first_byte_timeout,omitempty"`
}

// provider copies the config into the catalog's form, which Provision
// then completes; the config keeps its placeholders.
func (pc ProviderConfig) provider() (*catalog.Provider, error) {
	dp, err := pc.dataPolicy()
	if err != nil {
		return nil, fmt.Errorf("provider %q: %v", pc.Name, err)
	}
	if pc.Quantization != "" && !slices.Contains(catalog.Quantizations, pc.Quantization) {
		return nil, fmt.Errorf("provider %q: quantization: expected one of %s, got %q", pc.Name, strings.Join(catalog.Quantizations, ", "), pc.Quantization)
	}
	for _, param := range pc.SupportedParameters {
		if !slices.Contains(openai.Parameters, param) && !slices.Contains(anthropic.Parameters, param) && !slices.Contains(extraParameters, param) {
			return nil, fmt.Errorf("provider %q: supported_parameters: unknown parameter %q", pc.Name, param)
		}
	}
	for _, t := range []struct {
		name string
		d    caddy.Duration
	}{{"dial_timeout", pc.DialTimeout}, {"response_header_timeout", pc.ResponseHeaderTimeout}, {"first_byte_timeout", pc.FirstByteTimeout}} {
		if t.d < 0 {
			return nil, fmt.Errorf("provider %q: %s: must be positive, got %s", pc.Name, t.name, time.Duration(t.d))
		}
	}
	if time.Duration(pc.DialTimeout) > handlers.MaxDialTimeout {
		return nil, fmt.Errorf("provider %q: dial_timeout: at most %s, got %s", pc.Name, handlers.MaxDialTimeout, time.Duration(pc.DialTimeout))
	}
	style, mod := pc.Style, pc.dialect
	if mod == nil && pc.DialectRaw != nil {
		raw, err := pc.dialectRaw()
		if err == nil {
			mod, err = dialect.Load(raw)
		}
		if err != nil {
			return nil, fmt.Errorf("provider %q: %v", pc.Name, err)
		}
	}
	if mod != nil {
		style = mod.CaddyModule().ID.Name()
	}
	// Without a module (the older fields, unloaded), Resolve builds the
	// dialect from Style and Settings, and reports their errors.
	p := &catalog.Provider{Name: pc.Name, BaseURL: pc.BaseURL, Model: pc.Model, APIKey: pc.APIKey,
		Style: style, Module: mod, API: pc.API,
		MaxTokensField: pc.MaxTokensField, SearchFamily: pc.SearchFamily, DataPolicy: dp,
		Quantization: pc.Quantization, SupportedParameters: pc.SupportedParameters, SystemMessages: pc.SystemMessages,
		Settings: pc.Settings, Timeouts: catalog.Timeouts{Dial: time.Duration(pc.DialTimeout),
			ResponseHeader: time.Duration(pc.ResponseHeaderTimeout), FirstByte: time.Duration(pc.FirstByteTimeout)}}
	if pc.Pricing != nil {
		pricing, err := pc.Pricing.pricing()
		if err != nil {
			return nil, fmt.Errorf("provider %q: %v", pc.Name, err)
		}
		p.Pricing = &pricing
	}
	return p, nil
}

// dialectRaw is the provider's dialect config: DialectRaw, else the one
// its older fields Style and Settings say, else openai's.
func (pc *ProviderConfig) dialectRaw() (json.RawMessage, error) {
	if pc.DialectRaw != nil {
		if pc.Style != "" || len(pc.Settings) > 0 {
			return nil, errors.New("dialect: set instead of style and settings, not with them")
		}
		return pc.DialectRaw, nil
	}
	style := pc.Style
	if style == "" {
		style = openai.Style
	}
	raw := make(map[string]string, len(pc.Settings)+1)
	maps.Copy(raw, pc.Settings)
	if _, ok := raw["style"]; ok {
		return nil, errors.New(`settings: "style" is not a dialect option`)
	}
	raw["style"] = style
	return json.Marshal(raw)
}

// loadDialect loads the provider's dialect module with ctx, from
// DialectRaw or the older fields.
func (pc *ProviderConfig) loadDialect(ctx caddy.Context) error {
	raw, err := pc.dialectRaw()
	if err == nil {
		_, err = dialect.Load(raw) // its errors name the option, not the module
	}
	if err != nil {
		return err
	}
	pc.DialectRaw = raw
	mod, err := ctx.LoadModule(pc, "DialectRaw")
	if err != nil {
		return err
	}
	d, ok := mod.(dialect.Module)
	if !ok {
		return fmt.Errorf("dialect: module %T is not a dialect", mod)
	}
	pc.dialect = d
	return nil
}

// inheritPrices gives each provider's own pricing the model's per-request
// and web search prices where the provider's sets none: a provider
// pricing states what differs (its token prices, required), not a free
// request. providers are the configs m.Providers were made from, in order.
func inheritPrices(m *catalog.Model, providers []ProviderConfig) {
	for i, pc := range providers {
		p := m.Providers[i]
		if p.Pricing == nil {
			continue
		}
		if pc.Pricing.Request == "" {
			p.Pricing.Request = m.Pricing.Request
		}
		if pc.Pricing.WebSearch == "" {
			p.Pricing.WebSearch = m.Pricing.WebSearch
		}
		if pc.Pricing.SearchUnit == "" {
			p.Pricing.SearchUnit = m.Pricing.SearchUnit
		}
		if pc.Pricing.Document == "" {
			p.Pricing.Document = m.Pricing.Document
		}
		if pc.Pricing.ImageOutput == "" {
			p.Pricing.ImageOutput = m.Pricing.ImageOutput
		}
		if pc.Pricing.Character == "" {
			p.Pricing.Character = m.Pricing.Character
		}
		if pc.Pricing.AudioSecond == "" {
			p.Pricing.AudioSecond = m.Pricing.AudioSecond
		}
	}
}

// extraParameters are request parameters a provider may state it takes
// beyond the dialects' defaults (openai.Parameters,
// anthropic.Parameters).
var extraParameters = []string{"min_p", "top_a", "repetition_penalty", "verbosity", "web_search_options", "prediction"}

// pricing parses the prices.
func (pc PricingConfig) pricing() (billing.Pricing, error) {
	var p billing.Pricing
	for _, f := range []struct {
		name, s  string
		required bool
		dst      *billing.Price
	}{
		{"pricing.prompt", pc.Prompt, true, &p.Prompt},
		{"pricing.completion", pc.Completion, true, &p.Completion},
		{"pricing.request", pc.Request, false, &p.Request},
		{"pricing.web_search", pc.WebSearch, false, &p.WebSearch},
		{"pricing.input_cache_read", pc.InputCacheRead, false, &p.InputCacheRead},
		{"pricing.input_cache_write", pc.InputCacheWrite, false, &p.InputCacheWrite},
		{"pricing.input_cache_write_1h", pc.InputCacheWrite1h, false, &p.InputCacheWrite1h},
		{"pricing.search_unit", pc.SearchUnit, false, &p.SearchUnit},
		{"pricing.document", pc.Document, false, &p.Document},
		{"pricing.image_output", pc.ImageOutput, false, &p.ImageOutput},
		{"pricing.character", pc.Character, false, &p.Character},
		{"pricing.audio_second", pc.AudioSecond, false, &p.AudioSecond},
	} {
		if err := parsePriceField(f.s, f.required, f.dst); err != nil {
			return p, fmt.Errorf("%s: %v", f.name, err)
		}
	}
	p.CacheReadSet, p.CacheWriteSet = pc.InputCacheRead != "", pc.InputCacheWrite != ""
	p.CacheWrite1hSet = pc.InputCacheWrite1h != ""
	var err error
	p.Overrides, err = parseOverrides(pc.Overrides)
	return p, err
}

// parseOverrides checks and converts a pricing's overrides; nil without
// any. An error names the entry and its field.
func parseOverrides(cfgs []PricingOverrideConfig) (*billing.Overrides, error) {
	if len(cfgs) == 0 {
		return nil, nil
	}
	ov := &billing.Overrides{Entries: make([]billing.Override, len(cfgs))}
	for i, c := range cfgs {
		o := &ov.Entries[i]
		name := fmt.Sprintf("pricing.overrides[%d]", i)
		for _, f := range []struct {
			name, s string
			key     billing.PriceKeys
			dst     *billing.Price
		}{
			{"prompt", c.Prompt, billing.KeyPrompt, &o.Prompt},
			{"completion", c.Completion, billing.KeyCompletion, &o.Completion},
			{"input_cache_read", c.InputCacheRead, billing.KeyInputCacheRead, &o.InputCacheRead},
			{"input_cache_write", c.InputCacheWrite, billing.KeyInputCacheWrite, &o.InputCacheWrite},
			{"input_cache_write_1h", c.InputCacheWrite1h, billing.KeyInputCacheWrite1h, &o.InputCacheWrite1h},
		} {
			if f.s == "" {
				continue
			}
			if err := parsePriceField(f.s, false, f.dst); err != nil {
				return nil, fmt.Errorf("%s.%s: %v", name, f.name, err)
			}
			o.Sets |= f.key
		}
		if c.MinPromptTokens != nil {
			n, err := billing.ParseMinPrompt(*c.MinPromptTokens)
			if err != nil {
				return nil, fmt.Errorf("%s.min_prompt_tokens: %v", name, err)
			}
			o.MinPromptTokens, o.HasMinPrompt = n, true
		}
		if c.UTCStart != nil || c.UTCEnd != nil {
			// One bound alone runs the window from midnight or to it.
			o.HasWindow, o.UTCEnd = true, 24*60
			for _, b := range []struct {
				name string
				v    *float64
				dst  *int
			}{{"utc_start", c.UTCStart, &o.UTCStart}, {"utc_end", c.UTCEnd, &o.UTCEnd}} {
				if b.v == nil {
					continue
				}
				m, err := billing.ParseClock(*b.v)
				if err != nil {
					return nil, fmt.Errorf("%s.%s: %v", name, b.name, err)
				}
				*b.dst = m
			}
			if o.UTCStart == o.UTCEnd {
				return nil, fmt.Errorf("%s: utc_start and utc_end make an empty window", name)
			}
		}
		switch {
		case o.Sets == 0:
			return nil, fmt.Errorf("%s: sets no price (prompt, completion, input_cache_read, input_cache_write, input_cache_write_1h)", name)
		case !o.HasMinPrompt && !o.HasWindow:
			// The base prices are those of the default conditions.
			return nil, fmt.Errorf("%s: has no condition (min_prompt_tokens, utc_start, utc_end)", name)
		}
	}
	return ov, nil
}

// dataPolicy checks and converts the provider's data-policy facts.
func (pc ProviderConfig) dataPolicy() (catalog.DataPolicy, error) {
	dp := catalog.DataPolicy{ZDR: pc.ZDR}
	for _, f := range []struct {
		name, v string
		deny    *bool
	}{{"data_collection", pc.DataCollection, &dp.NoDataCollection}, {"publication", pc.Publication, &dp.NoPublication}} {
		switch f.v {
		case "", "allow":
			if pc.ZDR && f.v == "allow" {
				return dp, fmt.Errorf("%s: allow contradicts zdr (zero data retention)", f.name)
			}
		case "deny":
			*f.deny = true
		default:
			return dp, fmt.Errorf("%s: expected allow or deny, got %q", f.name, f.v)
		}
	}
	if pc.ZDR {
		dp.NoDataCollection, dp.NoPublication = true, true
	}
	switch pc.Region {
	case "", "global", "europe", "us":
		dp.Region = pc.Region
	default:
		return dp, fmt.Errorf("region: expected global, europe or us, got %q", pc.Region)
	}
	return dp, nil
}

// PricingConfig holds prices as exact decimal strings. Prompt and
// completion are required ("0" for free), so that a forgotten price can
// never make a model free.
type PricingConfig struct {
	Prompt     string `json:"prompt,omitempty"`     // per input token
	Completion string `json:"completion,omitempty"` // per output token
	Request    string `json:"request,omitempty"`    // per request; default 0
	WebSearch  string `json:"web_search,omitempty"` // per search result; default 0
	// InputCacheRead and InputCacheWrite price the prompt tokens read from
	// and written to the provider's prompt cache; default the prompt price.
	InputCacheRead  string `json:"input_cache_read,omitempty"`
	InputCacheWrite string `json:"input_cache_write,omitempty"`
	// InputCacheWrite1h prices the cache writes kept for an hour; default
	// the input_cache_write price.
	InputCacheWrite1h string `json:"input_cache_write_1h,omitempty"`
	// Overrides are conditional prices: a long prompt's, hours of the day.
	Overrides []PricingOverrideConfig `json:"overrides,omitempty"`
	// The prices per item: a rerank search unit, a reranked document, an
	// image returned; default 0.
	SearchUnit  string `json:"search_unit,omitempty"`
	Document    string `json:"document,omitempty"`
	ImageOutput string `json:"image_output,omitempty"`
	// The audio routes' prices: a character of text spoken, a second of
	// audio transcribed; default 0.
	Character   string `json:"character,omitempty"`
	AudioSecond string `json:"audio_second,omitempty"`
}

// PricingOverrideConfig is one conditional price, in the public API's
// shape: it applies when every condition it has holds (a prompt of more
// than min_prompt_tokens tokens; a daily UTC window [utc_start, utc_end)
// of HHMM clock numbers, which may wrap past midnight), later entries win
// per price, and a price it does not set is the base price.
type PricingOverrideConfig struct {
	MinPromptTokens   *float64 `json:"min_prompt_tokens,omitempty"`
	UTCStart          *float64 `json:"utc_start,omitempty"`
	UTCEnd            *float64 `json:"utc_end,omitempty"`
	Prompt            string   `json:"prompt,omitempty"`
	Completion        string   `json:"completion,omitempty"`
	InputCacheRead    string   `json:"input_cache_read,omitempty"`
	InputCacheWrite   string   `json:"input_cache_write,omitempty"`
	InputCacheWrite1h string   `json:"input_cache_write_1h,omitempty"`
}

// defaultCreated is the `created` time of models that do not set one: a
// fixed instant (2024-01-01T00:00:00Z), so that the public list does not
// change on every config reload.
const defaultCreated = 1704067200

// providersParameters are the parameters any of the providers takes (the
// public list's supported_parameters of a model), in the providers'
// order; nil without providers.
func providersParameters(providers []*catalog.Provider) []string {
	var out []string
	for _, p := range providers {
		for _, param := range p.Parameters() {
			if !slices.Contains(out, param) {
				out = append(out, param)
			}
		}
	}
	return out
}

// defaultSupportedParameters are what a model without providers lists.
var defaultSupportedParameters = []string{"max_tokens", "temperature", "top_p", "stop", "tools", "tool_choice"}

// loadCatalog builds the catalog: the models of models_file first, then
// the configured ones. Placeholders in base_url and api_key are expanded
// here; keys never appear in errors or logs.
func (a *App) loadCatalog() (*catalog.Catalog, error) {
	repl := caddy.NewReplacer()
	var models []*catalog.Model
	if a.ModelsFile != "" {
		path := repl.ReplaceAll(a.ModelsFile, "")
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("models_file: %v", err)
		}
		models, err = parseModelsFile(data)
		if err != nil {
			return nil, fmt.Errorf("models_file %s: %v", path, err)
		}
	}
	for i := range a.Models {
		m, err := a.Models[i].model()
		if err != nil {
			return nil, err
		}
		models = append(models, m)
	}
	seen := make(map[string]bool, len(models))
	for _, m := range models {
		if seen[m.ID] {
			return nil, fmt.Errorf("model %q: duplicate id", m.ID)
		}
		seen[m.ID] = true
		for _, p := range m.Providers {
			if err := provisionProvider(p, m.ID, repl); err != nil {
				return nil, fmt.Errorf("model %q: provider %q: %v", m.ID, p.Name, err)
			}
			if p.APIKey == "" && a.logger != nil {
				a.logger.Warn("provider has no api_key: the model cannot be served with the operator's key",
					zap.String("model", m.ID), zap.String("provider", p.Name))
			}
		}
	}
	return catalog.New(models), nil
}

// model converts a configured model and builds its public object.
func (mc *ModelConfig) model() (*catalog.Model, error) {
	if mc.ID == "" {
		return nil, errors.New("model: id is required")
	}
	fail := func(field string, err error) error { return fmt.Errorf("model %q: %s: %v", mc.ID, field, err) }
	if mc.ContextLength < 0 {
		return nil, fail("context_length", errors.New("must not be negative"))
	}
	if mc.MaxCompletionTokens < 0 {
		return nil, fail("max_completion_tokens", errors.New("must not be negative"))
	}
	m := &catalog.Model{ID: mc.ID, Name: mc.Name, ContextLength: mc.ContextLength, MaxCompletionTokens: mc.MaxCompletionTokens,
		Moderation: mc.Moderation}
	var err error
	if m.Tokenizer, err = modelTokenizer(mc.ID, mc.Tokenizer); err != nil {
		return nil, err
	}
	if m.Name == "" {
		m.Name = m.ID
	}
	pricing, err := mc.Pricing.pricing()
	if err != nil {
		return nil, fmt.Errorf("model %q: %v", mc.ID, err)
	}
	m.Pricing = pricing
	m.Distillable = mc.DistillableText
	for _, pc := range mc.Providers {
		p, err := pc.provider()
		if err != nil {
			return nil, fmt.Errorf("model %q: %v", mc.ID, err)
		}
		m.Providers = append(m.Providers, p)
	}
	inheritPrices(m, mc.Providers)
	pm := newPublicModel(m)
	if params := providersParameters(m.Providers); params != nil {
		pm.SupportedParameters = params
	}
	if m.Pricing.CacheReadSet {
		pm.Pricing.InputCacheRead = &m.Pricing.InputCacheRead
	}
	if m.Pricing.CacheWriteSet {
		pm.Pricing.InputCacheWrite = &m.Pricing.InputCacheWrite
	}
	if m.Pricing.CacheWrite1hSet {
		pm.Pricing.InputCacheWrite1h = &m.Pricing.InputCacheWrite1h
	}
	if m.Pricing.Overrides != nil {
		pm.Pricing.Overrides = m.Pricing.Overrides.Entries
	}
	for _, f := range []struct {
		price billing.Price
		dst   **billing.Price
	}{{m.Pricing.SearchUnit, &pm.Pricing.SearchUnit}, {m.Pricing.Document, &pm.Pricing.Document}, {m.Pricing.ImageOutput, &pm.Pricing.ImageOutput},
		{m.Pricing.Character, &pm.Pricing.Character}, {m.Pricing.AudioSecond, &pm.Pricing.AudioSecond}} {
		if f.price > 0 {
			*f.dst = &f.price
		}
	}
	if m.Pricing.ImageOutput > 0 {
		// Priced per image: an image generation model.
		pm.Architecture.Modality, pm.Architecture.OutputModalities = "text->image", []string{"image"}
	}
	pub, err := marshal(pm)
	if err != nil {
		return nil, fail("public object", err)
	}
	m.Public = pub
	return m, nil
}

func parsePriceField(s string, required bool, dst *billing.Price) error {
	if s == "" {
		if required {
			return errors.New(`required (use "0" for free)`)
		}
		return nil
	}
	p, err := billing.ParsePrice(s)
	if err != nil {
		return fmt.Errorf("%q: %v", s, err)
	}
	*dst = p
	return nil
}

// publicModel is a model in the public models-list format, with every
// field the public SDKs require.
type publicModel struct {
	ID                  string             `json:"id"`
	CanonicalSlug       string             `json:"canonical_slug"`
	Name                string             `json:"name"`
	Created             int64              `json:"created"`
	Description         string             `json:"description"`
	ContextLength       *int64             `json:"context_length"`
	Architecture        publicArchitecture `json:"architecture"`
	Pricing             publicPricing      `json:"pricing"`
	TopProvider         publicTopProvider  `json:"top_provider"`
	PerRequestLimits    *struct{}          `json:"per_request_limits"`
	SupportedParameters []string           `json:"supported_parameters"`
	SupportedVoices     []string           `json:"supported_voices"`
	DefaultParameters   *struct{}          `json:"default_parameters"`
	KnowledgeCutoff     *string            `json:"knowledge_cutoff"`
	ExpirationDate      *string            `json:"expiration_date"`
	Links               publicLinks        `json:"links"`
}

type publicArchitecture struct {
	Modality         string   `json:"modality"`
	InputModalities  []string `json:"input_modalities"`
	OutputModalities []string `json:"output_modalities"`
	Tokenizer        string   `json:"tokenizer"`
	InstructType     *string  `json:"instruct_type"`
}

type publicPricing struct {
	Prompt     billing.Price `json:"prompt"`
	Completion billing.Price `json:"completion"`
	Request    billing.Price `json:"request"`
	WebSearch  billing.Price `json:"web_search"`
	// The prompt cache's prices, only when the operator set them.
	InputCacheRead    *billing.Price     `json:"input_cache_read,omitempty"`
	InputCacheWrite   *billing.Price     `json:"input_cache_write,omitempty"`
	InputCacheWrite1h *billing.Price     `json:"input_cache_write_1h,omitempty"`
	Overrides         []billing.Override `json:"overrides,omitempty"`
	// The prices per item, only when the operator set them.
	SearchUnit  *billing.Price `json:"search_unit,omitempty"`
	Document    *billing.Price `json:"document,omitempty"`
	ImageOutput *billing.Price `json:"image_output,omitempty"`
	Character   *billing.Price `json:"character,omitempty"`
	AudioSecond *billing.Price `json:"audio_second,omitempty"`
}

type publicTopProvider struct {
	ContextLength       *int64 `json:"context_length"`
	IsModerated         bool   `json:"is_moderated"`
	MaxCompletionTokens *int64 `json:"max_completion_tokens"`
}

type publicLinks struct {
	Details string `json:"details"`
}

func newPublicModel(m *catalog.Model) publicModel {
	return publicModel{
		ID:            m.ID,
		CanonicalSlug: m.ID,
		Name:          m.Name,
		Created:       defaultCreated,
		ContextLength: nullIfZero(m.ContextLength),
		Architecture: publicArchitecture{
			Modality:         "text->text",
			InputModalities:  []string{"text"},
			OutputModalities: []string{"text"},
			Tokenizer:        "Other",
		},
		Pricing: publicPricing{
			Prompt:     m.Pricing.Prompt,
			Completion: m.Pricing.Completion,
			Request:    m.Pricing.Request,
			WebSearch:  m.Pricing.WebSearch,
		},
		TopProvider: publicTopProvider{
			ContextLength:       nullIfZero(m.ContextLength),
			IsModerated:         m.Moderation,
			MaxCompletionTokens: nullIfZero(m.MaxCompletionTokens),
		},
		SupportedParameters: defaultSupportedParameters,
		Links:               publicLinks{Details: detailsLink(m.ID)},
	}
}

func nullIfZero(n int64) *int64 {
	if n == 0 {
		return nil
	}
	return &n
}

func detailsLink(id string) string { return "/api/v1/models/" + id + "/endpoints" }

// parseModelsFile reads a models list in the public format,
// {"data":[model, ...]}, where a model may carry the gateway's own
// "tollgate": {"providers": [...]}. The public fields are kept as written,
// missing required ones are filled in, and "tollgate" is removed.
func parseModelsFile(data []byte) ([]*catalog.Model, error) {
	if !jsoncheck.Valid(data) {
		return nil, errors.New("not valid JSON")
	}
	list := gjson.GetBytes(data, "data")
	if !list.IsArray() {
		return nil, errors.New(`expected {"data": [models...]}`)
	}
	var models []*catalog.Model
	var err error
	list.ForEach(func(key, v gjson.Result) bool {
		var m *catalog.Model
		if m, err = parseFileModel(int(key.Int()), v); err == nil {
			models = append(models, m)
		}
		return err == nil
	})
	return models, err
}

func parseFileModel(index int, v gjson.Result) (*catalog.Model, error) {
	if !v.IsObject() {
		return nil, fmt.Errorf("data[%d]: expected a model object", index)
	}
	id := v.Get("id")
	if id.Type != gjson.String || id.Str == "" {
		return nil, fmt.Errorf("data[%d]: id: expected a non-empty string", index)
	}
	fail := func(field, want string) error { return fmt.Errorf("model %q: %s: expected %s", id.Str, field, want) }
	for _, obj := range []string{"architecture", "pricing", "top_provider", "links", "tollgate"} {
		if f := v.Get(obj); f.Exists() && !f.IsObject() {
			return nil, fail(obj, "an object")
		}
	}
	m := &catalog.Model{ID: id.Str}

	// The gateway's extension, strictly: a misspelt field must not go
	// unnoticed.
	var cfg struct {
		Providers       []ProviderConfig `json:"providers"`
		DistillableText bool             `json:"distillable_text"`
		Tokenizer       string           `json:"tokenizer"`
	}
	if ext := v.Get("tollgate"); ext.Exists() {
		dec := json.NewDecoder(strings.NewReader(ext.Raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return nil, fmt.Errorf("model %q: tollgate: %v", id.Str, err)
		}
		for _, pc := range cfg.Providers {
			p, err := pc.provider()
			if err != nil {
				return nil, fmt.Errorf("model %q: tollgate: %v", id.Str, err)
			}
			m.Providers = append(m.Providers, p)
		}
		m.Distillable = cfg.DistillableText
	}
	var err error
	if m.Tokenizer, err = modelTokenizer(id.Str, cfg.Tokenizer); err != nil {
		return nil, err
	}
	raw, err := sjson.Delete(v.Raw, "tollgate")
	if err != nil {
		return nil, fmt.Errorf("model %q: %v", id.Str, err)
	}

	ctxLen := gjson.Get(raw, "context_length")
	ctxRaw := "null"
	if ctxLen.Exists() {
		ctxRaw = ctxLen.Raw
	}
	for _, d := range []struct{ path, raw string }{
		{"canonical_slug", mustJSON(id.Str)},
		{"name", mustJSON(id.Str)},
		{"created", fmt.Sprint(defaultCreated)},
		{"description", `""`},
		{"context_length", "null"},
		{"architecture.modality", `"text->text"`},
		{"architecture.input_modalities", `["text"]`},
		{"architecture.output_modalities", `["text"]`},
		{"top_provider.context_length", ctxRaw},
		{"top_provider.is_moderated", "false"},
		{"top_provider.max_completion_tokens", "null"},
		{"per_request_limits", "null"},
		{"supported_parameters", mustJSON(defaultSupportedParameters)},
		{"supported_voices", "null"},
		{"default_parameters", "null"},
		{"links.details", mustJSON(detailsLink(id.Str))},
	} {
		if !gjson.Get(raw, d.path).Exists() {
			if raw, err = sjson.SetRaw(raw, d.path, d.raw); err != nil {
				return nil, fmt.Errorf("model %q: %s: %v", id.Str, d.path, err)
			}
		}
	}

	pub := gjson.Parse(raw)
	for _, c := range []struct {
		path, want string
		ok         func(gjson.Result) bool
	}{
		{"canonical_slug", "a string", isString},
		{"name", "a string", isString},
		{"created", "an integer", isInt},
		{"description", "a string", isString},
		{"context_length", "an integer or null", nullOr(isInt)},
		{"architecture.modality", "a string or null", nullOr(isString)},
		{"architecture.input_modalities", "an array of strings", isStrings},
		{"architecture.output_modalities", "an array of strings", isStrings},
		{"pricing.prompt", "a decimal string", isString},
		{"pricing.completion", "a decimal string", isString},
		{"top_provider.context_length", "an integer or null", nullOr(isInt)},
		{"top_provider.is_moderated", "a boolean", gjson.Result.IsBool},
		{"top_provider.max_completion_tokens", "an integer or null", nullOr(isInt)},
		{"per_request_limits", "an object or null", nullOr(gjson.Result.IsObject)},
		{"supported_parameters", "an array of strings", isStrings},
		{"supported_voices", "an array of strings or null", nullOr(isStrings)},
		{"default_parameters", "an object or null", nullOr(gjson.Result.IsObject)},
		{"links.details", "a string", isString},
	} {
		if !c.ok(pub.Get(c.path)) {
			return nil, fail(c.path, c.want)
		}
	}

	m.Name = pub.Get("name").Str
	m.ContextLength = pub.Get("context_length").Int()
	m.MaxCompletionTokens = pub.Get("top_provider.max_completion_tokens").Int()
	if m.ContextLength < 0 {
		return nil, fail("context_length", "a non-negative integer")
	}
	if m.MaxCompletionTokens < 0 {
		return nil, fail("top_provider.max_completion_tokens", "a non-negative integer")
	}
	for _, f := range []struct {
		name     string
		required bool
		dst      *billing.Price
	}{
		{"prompt", true, &m.Pricing.Prompt},
		{"completion", true, &m.Pricing.Completion},
		{"request", false, &m.Pricing.Request},
		{"web_search", false, &m.Pricing.WebSearch},
		{"input_cache_read", false, &m.Pricing.InputCacheRead},
		{"input_cache_write", false, &m.Pricing.InputCacheWrite},
		{"input_cache_write_1h", false, &m.Pricing.InputCacheWrite1h},
		{"search_unit", false, &m.Pricing.SearchUnit},
		{"document", false, &m.Pricing.Document},
		{"image_output", false, &m.Pricing.ImageOutput},
		{"character", false, &m.Pricing.Character},
		{"audio_second", false, &m.Pricing.AudioSecond},
	} {
		p := pub.Get("pricing." + f.name)
		if p.Exists() && p.Type != gjson.String {
			return nil, fail("pricing."+f.name, "a decimal string")
		}
		if err := parsePriceField(p.Str, f.required, f.dst); err != nil {
			return nil, fmt.Errorf("model %q: pricing.%s: %v", id.Str, f.name, err)
		}
	}
	m.Pricing.CacheReadSet = pub.Get("pricing.input_cache_read").Str != ""
	m.Pricing.CacheWriteSet = pub.Get("pricing.input_cache_write").Str != ""
	m.Pricing.CacheWrite1hSet = pub.Get("pricing.input_cache_write_1h").Str != ""
	if ov := pub.Get("pricing.overrides"); ov.Exists() {
		var cfgs []PricingOverrideConfig
		if err := json.Unmarshal([]byte(ov.Raw), &cfgs); err != nil {
			return nil, fail("pricing.overrides", "an array of pricing overrides")
		}
		if m.Pricing.Overrides, err = parseOverrides(cfgs); err != nil {
			return nil, fmt.Errorf("model %q: %v", id.Str, err)
		}
	}
	inheritPrices(m, cfg.Providers)

	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(raw)); err != nil {
		return nil, fmt.Errorf("model %q: %v", id.Str, err)
	}
	m.Public = compact.Bytes()
	return m, nil
}

func isString(v gjson.Result) bool { return v.Type == gjson.String }

func isInt(v gjson.Result) bool {
	return v.Type == gjson.Number && v.Float() == float64(v.Int())
}

func isStrings(v gjson.Result) bool {
	if !v.IsArray() {
		return false
	}
	for _, e := range v.Array() {
		if e.Type != gjson.String {
			return false
		}
	}
	return true
}

func nullOr(ok func(gjson.Result) bool) func(gjson.Result) bool {
	return func(v gjson.Result) bool { return v.Type == gjson.Null || ok(v) }
}

func mustJSON(v any) string {
	b, err := marshal(v)
	if err != nil {
		panic(err) // only called on strings and string slices
	}
	return string(b)
}

// marshal is json.Marshal without HTML escaping, so that "text->text"
// reads as written.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// provisionProvider checks a provider, expands the placeholders of its
// base_url and api_key, and derives what reverse_proxy needs from the URL.
func provisionProvider(p *catalog.Provider, modelID string, repl *caddy.Replacer) error {
	if err := checkProvider(p); err != nil {
		return err
	}
	if p.Model == "" {
		p.Model = modelID
	}
	if p.Style == "" {
		p.Style = openai.Style
	}
	configured := p.BaseURL // as written: the expanded form may hold secrets
	p.APIKey = repl.ReplaceKnown(p.APIKey, "")
	p.BaseURL = repl.ReplaceKnown(p.BaseURL, "")
	u, err := parseBaseURL(p.BaseURL, configured)
	if err != nil {
		return err
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	p.Scheme = u.Scheme
	p.Dial = net.JoinHostPort(u.Hostname(), port)
	p.Host = u.Host
	// No trailing slash: the router appends paths that start with one.
	p.BasePath = strings.TrimRight(u.EscapedPath(), "/")
	return p.Resolve()
}

// checkProvider checks the settings of a provider that need no
// placeholder expanded, so that the Caddyfile adapter checks them too.
func checkProvider(p *catalog.Provider) error {
	if p.Name == "" {
		return errors.New("name: required")
	}
	// The dialect checks its style and options (without the host, known
	// once the base URL is expanded: provisionProvider resolves it again).
	d := *p
	if err := d.Resolve(); err != nil {
		return err
	}
	if kr, ok := d.Dialect.(dialect.KeyRequirer); ok && kr.RequiresKey() && p.APIKey == "" {
		return fmt.Errorf("api_key: required for style %s", d.Dialect.Name())
	}
	switch p.API {
	case "", dialect.APIResponses, dialect.APIChat:
	default:
		return fmt.Errorf("api: unsupported %q (\"chat\" or \"responses\")", p.API)
	}
	switch p.MaxTokensField {
	case "", "max_tokens", "max_completion_tokens":
	default:
		return fmt.Errorf("max_tokens_field: expected max_tokens or max_completion_tokens, got %q", p.MaxTokensField)
	}
	switch p.SearchFamily {
	case "", "openai", "anthropic", "x", "none":
	default:
		return fmt.Errorf("search_family: expected openai, anthropic, x or none, got %q", p.SearchFamily)
	}
	switch p.SystemMessages {
	case "", dialect.SystemPass:
	case dialect.SystemFold:
		if !d.Dialect.Native(dialect.Messages) {
			return errors.New("system_messages: fold applies to style anthropic only (chat providers take system messages anywhere)")
		}
	default:
		return fmt.Errorf("system_messages: expected pass or fold, got %q", p.SystemMessages)
	}
	return nil
}

// parseBaseURL parses a provider's expanded base URL; errors show it as
// configured, since the expanded form may hold secrets.
func parseBaseURL(expanded, configured string) (*url.URL, error) {
	u, err := url.Parse(expanded)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" ||
		u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("base_url: expected an http or https URL with a host and no query, got %q", configured)
	}
	return u, nil
}

// check is what the Caddyfile adapter can check of a configured model
// before the config loads: its prices, data-policy facts and providers'
// settings, and each base_url that holds no placeholder.
func (mc *ModelConfig) check() error {
	m, err := mc.model()
	if err != nil {
		return err
	}
	for _, p := range m.Providers {
		if err := checkProvider(p); err != nil {
			return fmt.Errorf("model %q: provider %q: %v", m.ID, p.Name, err)
		}
		if !strings.Contains(p.BaseURL, "{") {
			if _, err := parseBaseURL(p.BaseURL, p.BaseURL); err != nil {
				return fmt.Errorf("model %q: provider %q: %v", m.ID, p.Name, err)
			}
		}
	}
	return nil
}
