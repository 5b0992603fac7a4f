// Package catalog is the operator's model catalog: the models the gateway
// offers, their prices and the provider endpoints that serve them.
package catalog

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/breaker"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/dialect/openai"
	"github.com/tollgate-dev/caddy-tollgate/routestats"
	"github.com/tollgate-dev/caddy-tollgate/tokenizer"
)

// Provider is one upstream endpoint that serves a model.
type Provider struct {
	// Name identifies the provider ("openai", "mock"); BYOK credentials
	// match on it.
	Name string `json:"name"`
	// BaseURL is the provider's API root, e.g. https://api.openai.com/v1.
	BaseURL string `json:"base_url"`
	// Model is the provider's id for the model, written into the request.
	Model string `json:"model"`
	// SearchFamily, when set, overrides the native web search family of
	// the model id's vendor: "openai", "anthropic", "x" or "none".
	SearchFamily string `json:"search_family,omitempty"`
	// APIKey is the operator's key for the provider; may be empty when only
	// BYOK credentials are used. Placeholders such as {env.OPENAI_API_KEY}
	// are expanded at provision time and never logged.
	APIKey string `json:"api_key,omitempty"`
	// Style is the provider's API dialect: a registered dialect's name
	// (openai.Style, the default, anthropic.Style, ...).
	Style string `json:"style,omitempty"`
	// Settings are the dialect's own options (an Azure deployment, ...).
	Settings map[string]string `json:"settings,omitempty"`
	// Module is the provider's dialect module as its config loaded it,
	// with its own options; nil: Style's with Settings.
	Module dialect.Module `json:"-"`
	// Dialect speaks the provider's API; set by Resolve.
	Dialect dialect.Dialect `json:"-"`
	// API is the generation API the provider speaks: dialect.APIResponses (or
	// empty: both APIs, passed through) or dialect.APIChat (Chat Completions only).
	API string `json:"api,omitempty"`
	// MaxTokensField is the output limit field the provider takes on chat
	// completions: "max_tokens" (or empty) or "max_completion_tokens".
	MaxTokensField string `json:"max_tokens_field,omitempty"`

	// Data-policy facts, as the operator states them; guardrails'
	// data-policy fields are decided from them. The defaults assume the
	// least: no zero data retention, prompts may be collected (trained
	// on or retained) and published, region global.
	DataPolicy DataPolicy `json:"data_policy,omitzero"`

	// Quantization is the numeric format the provider runs the model in
	// (one of Quantizations); empty: unknown.
	Quantization string `json:"quantization,omitempty"`
	// SupportedParameters are the request parameters the provider takes;
	// nil: its dialect's (DefaultParameters).
	SupportedParameters []string `json:"supported_parameters,omitempty"`
	// SystemMessages: dialect.SystemPass (or empty) or dialect.SystemFold, for an
	// Anthropic-style provider.
	SystemMessages string `json:"system_messages,omitempty"`
	// Timeouts bound the waits for the provider; a zero one is the
	// gateway's default.
	Timeouts Timeouts `json:"timeouts,omitzero"`
	// Pricing is what the provider charges for the model when it differs
	// from the model's pricing; nil: the model's. Model.For gives the
	// model as this provider prices it.
	Pricing *billing.Pricing `json:"-"`
	// Stats are the gateway's recent measurements of this endpoint (nil
	// for a provider outside a catalog: not measured).
	Stats *routestats.Stats `json:"-"`
	// Breaker is the endpoint's circuit breaker (nil for a provider
	// outside a catalog: never taken out of routing).
	Breaker *breaker.Breaker `json:"-"`

	priced *Model // the model at Pricing; set by New
	// dial is Dial as an interface value, set by New: reverse_proxy looks
	// {tollgate.upstream.dial} up on every request (DialValue).
	dial any
	// key is the header entry the dialect sets for APIKey, made by New
	// when the dialect's entry depends on the key alone (KeyEntry).
	key struct {
		of      string // the APIKey it was made for
		dialect dialect.Dialect
		name    string
		value   []string
	}
	// path is Path's last answer, shared by New with the provider's
	// copies: most attempts to an endpoint go to one path.
	path *atomic.Pointer[pathUnder]

	// Derived from BaseURL at provision time.
	Scheme   string `json:"-"` // "http" or "https"
	Dial     string `json:"-"` // host:port for reverse_proxy
	Host     string `json:"-"` // Host header value
	BasePath string `json:"-"` // path prefix without trailing slash, e.g. "/v1"
}

// DataPolicy is what a provider does with the prompts it receives.
type DataPolicy struct {
	// ZDR: zero data retention; implies no collection and no publication.
	ZDR bool `json:"zdr,omitempty"`
	// NoDataCollection: the provider neither trains on nor retains
	// prompts ("data_collection deny").
	NoDataCollection bool `json:"no_data_collection,omitempty"`
	// NoPublication: the provider does not publish prompts
	// ("publication deny").
	NoPublication bool `json:"no_publication,omitempty"`
	// Region: "global" (or empty), "europe" or "us".
	Region string `json:"region,omitempty"`
}

// Quantizations are the values of Provider.Quantization, as the public API
// names them.
var Quantizations = []string{"int4", "int8", "fp4", "mxfp4", "nvfp4", "fp6", "fp8", "mxfp8", "fp16", "bf16", "fp32", "unknown"}

// Parameters are the request parameters p takes: its SupportedParameters,
// else its dialect's.
func (p *Provider) Parameters() []string {
	if p.SupportedParameters != nil {
		return p.SupportedParameters
	}
	if d := p.resolved(); d != nil {
		return d.Parameters()
	}
	return nil // an unknown style, which the config load reports
}

// Resolve sets p's Dialect from its Module, else its Style and Settings:
// the error names the option that is missing or wrong.
func (p *Provider) Resolve() error {
	style := p.Style
	if style == "" {
		style = openai.Style
	}
	o := dialect.Options{Name: p.Name, Host: p.Host, Model: p.Model, API: p.API,
		MaxTokensField: p.MaxTokensField, SystemMessages: p.SystemMessages, Settings: p.Settings}
	var d dialect.Dialect
	var err error
	if p.Module != nil {
		d, err = p.Module.New(o)
	} else {
		d, err = dialect.New(style, o)
	}
	if err != nil {
		return err
	}
	p.Dialect = d
	return nil
}

// D is p's dialect. A provider made without Resolve (a test's) gets its
// style's on each call; an unknown style panics.
func (p *Provider) D() dialect.Dialect {
	d := p.resolved()
	if d == nil {
		panic("catalog: provider " + p.Name + " has an unknown style " + p.Style)
	}
	return d
}

// resolved is p's dialect; nil for an unknown style.
func (p *Provider) resolved() dialect.Dialect {
	if p.Dialect != nil {
		return p.Dialect
	}
	q := *p
	if q.Resolve() != nil {
		return nil
	}
	return q.Dialect
}

// FoldsSystem reports whether p takes system messages only as the
// top-level system.
func (p *Provider) FoldsSystem() bool { return p.SystemMessages == dialect.SystemFold }

// ChatOnly reports whether Responses requests must be translated for p.
func (p *Provider) ChatOnly() bool { return !p.D().Native(dialect.Responses) }

// Model is one entry of the catalog.
type Model struct {
	ID                  string          `json:"id"`
	Name                string          `json:"name"`
	ContextLength       int64           `json:"context_length"`
	MaxCompletionTokens int64           `json:"max_completion_tokens,omitempty"`
	Pricing             billing.Pricing `json:"-"`
	Providers           []*Provider     `json:"providers"`
	// Tokenizer counts the model's prompt tokens for admission as its
	// provider bills them; nil: unknown, bounded by the body's bytes.
	Tokenizer *tokenizer.Encoding `json:"-"`
	// Moderation: every request for the model passes the operator's
	// moderation provider first.
	Moderation bool `json:"moderation,omitempty"`
	// Distillable: the model's author allows its text output to be used
	// to train other models (`provider.enforce_distillable_text`).
	Distillable bool `json:"distillable,omitempty"`
	// Public is the model's object in the public models-list format, with
	// every field the public schema requires, as served by GET /models.
	Public json.RawMessage `json:"-"`
}

// For is m as provider p serves it: priced at p's own pricing when p has
// one, else m itself.
func (m *Model) For(p *Provider) *Model {
	if p.priced != nil {
		return p.priced
	}
	return m
}

// IsFree reports whether the model id names a free variant.
func (m *Model) IsFree() bool { return strings.HasSuffix(m.ID, ":free") }

// DialValue is p.Dial as an interface value: the one New made when Dial
// is still the string it boxed (no allocation), else a new one (Dial set
// after New, or a copy's).
func (p *Provider) DialValue() any {
	if d, ok := p.dial.(string); ok && d == p.Dial {
		return p.dial
	}
	return p.Dial
}

// KeyEntry is the header entry d's SetKey(h, key) sets, made once by New,
// when key is p's APIKey as New saw it (the same string: the operator's
// key, compared by address, never by content) and d the dialect New
// made it with; ok false otherwise (a BYOK key, a copy's other key or
// dialect, a dialect whose entry changes, p nil: the caller calls
// SetKey). The value is shared by every request: only read it.
func (p *Provider) KeyEntry(d dialect.Dialect, key string) (name string, value []string, ok bool) {
	if !p.keyEntryFor(d, key) {
		return "", nil, false
	}
	return p.key.name, p.key.value, true
}

// keyEntryFor: p.key was made for d and the very string key.
func (p *Provider) keyEntryFor(d dialect.Dialect, key string) bool {
	return p != nil && p.key.value != nil && len(key) == len(p.key.of) && unsafe.StringData(key) == unsafe.StringData(p.key.of) && d == p.key.dialect
}

// pathUnder is a path under a base path.
type pathUnder struct{ base, rest, path string }

// Path is rest (a path and query) under p's base path: the last one made
// for p again, when it is the same, and no new string.
func (p *Provider) Path(rest string) string {
	if p.BasePath == "" {
		return rest
	}
	if p.path == nil {
		return p.BasePath + rest
	}
	if c := p.path.Load(); c != nil && c.rest == rest && c.base == p.BasePath {
		return c.path
	}
	c := &pathUnder{base: p.BasePath, rest: rest, path: p.BasePath + rest}
	p.path.Store(c)
	return c.path
}

// Catalog is an immutable set of models, in the operator's order.
type Catalog struct {
	models []*Model
	// byID finds a model by its id, and the newest model of a family by
	// the family's alias (AliasOf), unless a model has that id.
	byID map[string]*Model
}

// New builds a catalog (and each provider's model at its own pricing); later duplicates of an id are an error for the
// caller to report, so New keeps the first.
func New(models []*Model) *Catalog {
	c := &Catalog{byID: make(map[string]*Model, len(models))}
	for _, m := range models {
		if _, dup := c.byID[m.ID]; dup {
			continue
		}
		c.models = append(c.models, m)
		c.byID[m.ID] = m
		for _, p := range m.Providers {
			if p.Stats == nil {
				p.Stats = routestats.For(m.ID, p.Name)
			}
			if p.Breaker == nil {
				p.Breaker = breaker.For(m.ID, p.Name)
			}
			if p.Dialect == nil {
				_ = p.Resolve() // the config load resolved and checked it; a test's provider
			}
			if p.path == nil {
				p.path = new(atomic.Pointer[pathUnder])
			}
			if d, ok := p.dial.(string); !ok || d != p.Dial {
				p.dial = p.Dial
			}
			if ke, ok := p.Dialect.(dialect.KeyEntry); ok && p.APIKey != "" && !p.keyEntryFor(p.Dialect, p.APIKey) {
				p.key.of, p.key.dialect = p.APIKey, p.Dialect
				name, value := ke.KeyEntry(p.APIKey)
				p.key.name, p.key.value = name, []string{value}
			}
			if p.Pricing != nil {
				priced := *m
				priced.Pricing = *p.Pricing
				p.priced = &priced
			}
		}
	}
	for alias, m := range aliases(c.models) {
		if _, taken := c.byID[alias]; !taken {
			c.byID[alias] = m
		}
	}
	return c
}

// Lookup finds a model by id, or the newest model of a family by its
// alias ("~anthropic/claude-sonnet-latest"): the model found has its own
// id, which the caller names from then on.
func (c *Catalog) Lookup(id string) (*Model, bool) {
	if c == nil {
		return nil, false
	}
	m, ok := c.byID[id]
	return m, ok
}

// Models returns the models in catalog order; callers must not modify it.
func (c *Catalog) Models() []*Model {
	if c == nil {
		return nil
	}
	return c.models
}

// Timeouts bound how long the gateway waits for a provider, so that a
// provider that hangs holds neither the client nor its credit hold: past
// any of them the attempt fails as timed out (the next provider is tried,
// or the client gets a 408), and nothing is charged.
type Timeouts struct {
	// Dial bounds opening a connection to the provider.
	Dial time.Duration `json:"dial,omitempty"`
	// ResponseHeader bounds the wait, once the request is sent, for the
	// answer's headers: for an answer that is not a stream, the whole
	// answer, which providers send at once.
	ResponseHeader time.Duration `json:"response_header,omitempty"`
	// FirstByte bounds the wait, once the request is sent, for the first
	// byte of a streamed answer (its headers included).
	FirstByte time.Duration `json:"first_byte,omitempty"`
}

// Outputs reports whether m's catalog entry lists modality ("image",
// "audio") among its output modalities.
func (m *Model) Outputs(modality string) bool {
	for _, v := range gjson.GetBytes(m.Public, "architecture.output_modalities").Array() {
		if v.Str == modality {
			return true
		}
	}
	return false
}
