// Package moderation is the moderation plugin, the Caddy module
// tollgate.plugins.moderation: the operator's moderation provider (the
// tollgate app's moderation block, Config) is asked about a request's
// text, once the request is admitted and before any search engine or
// provider, for every request to a model with the moderation switch and
// for any request with the plugin ({"id":"moderation"}). Flagged input is
// refused with 403 and nothing reaches the model's provider.
//
// Charging (the operator's price per call, if set): admission holds it;
// a clean verdict charges it with the answer; a flagged input, refused,
// is still charged it (the call was made: otherwise flagged input would
// be a free moderation service at the operator's expense), and its
// generation record says so. A request refused because the provider is
// down is not charged, nor is one served unmoderated under fail_open: no
// verdict was had.
package moderation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/contentfilter"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/money"
)

func init() {
	caddy.RegisterModule(new(Moderation))
}

// name is the plugin's id in a request's plugins array.
const name = "moderation"

// Moderation is the moderation plugin. It takes no configuration of its
// own: the provider is the tollgate app's moderation block.
type Moderation struct {
	// service is the gateway's moderation provider; nil: none.
	service *Service
	logger  *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (*Moderation) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "tollgate.plugins.moderation",
		New: func() caddy.Module { return new(Moderation) },
	}
}

// Provision finds the gateway's moderation provider.
func (p *Moderation) Provision(ctx caddy.Context) error {
	gw, err := gateway.Load(ctx)
	if err != nil {
		return err
	}
	if mp, ok := gw.(Provider); ok {
		p.service = mp.ModerationService()
	}
	p.logger = ctx.Logger()
	return nil
}

// UnmarshalCaddyfile reads the plugin's directive, which takes nothing
// (the provider is the global moderation block):
//
//	moderation
func (*Moderation) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return plugin.NoOptions(d, "moderation", " (the provider is the global moderation block)")
}

// Name implements plugin.Plugin.
func (*Moderation) Name() string { return name }

// CheckEntry implements plugin.Plugin: id and enabled are an entry's only
// members.
func (*Moderation) CheckEntry(path string, entry gjson.Result) *apierror.Error {
	return plugin.CheckMembers(path, name, entry, nil)
}

// Plan implements plugin.Plugin: the moderation the request asks for or
// one of its models requires, a call made once the request is admitted
// (Admit), so that a request the caller cannot pay for never costs the
// operator a call. Without a provider, a request asking for it is a 400
// and a model requiring it a 503.
func (p *Moderation) Plan(req *plugin.Request) (plugin.Run, *apierror.Error) {
	_, at := plugin.Entry(req.Plugins, name)
	asked := at >= 0
	required := false
	for i := range req.Models.Len() {
		if m := req.Models.At(i); m != nil && m.Moderation {
			required = true
			break
		}
	}
	if !asked && !required {
		return nil, nil
	}
	// The model the client asked for (a private endpoint's attempt may
	// have no catalog model).
	slug := gjson.GetBytes(req.Body, "model").Str
	if m := req.Models.At(0); m != nil {
		slug = m.ID
	}
	if p.service == nil {
		if asked {
			return nil, apierror.BadRequest("plugins: this gateway has no moderation provider (the moderation plugin is not available)")
		}
		return nil, apierror.New(http.StatusServiceUnavailable, "Model "+slug+" requires moderation, and this gateway has no moderation provider")
	}
	body := req.Body
	if req.Rewritten != nil {
		body = req.Rewritten // with the PDFs' text (the file-parser plugin)
	}
	texts := contentfilter.Texts(req.API, body)
	if len(texts) == 0 {
		return nil, nil
	}
	logger := p.logger
	if logger == nil {
		logger = zap.NewNop()
	}
	return &call{s: p.service, texts: texts, slug: slug, cost: p.service.price, logger: logger}, nil
}

// Config is the operator's moderation provider (the tollgate app's
// `moderation` block, which the app parses and builds): an endpoint of
// OpenAI's /v1/moderations shape. The gateway calls it, once per request and before any provider,
// for a model that requires moderation (the model's `moderation` switch)
// and for a request that asks for it with the `moderation` plugin.
type Config struct {
	// BaseURL is the provider's API root; the gateway POSTs to
	// <base_url>/moderations.
	BaseURL string `json:"base_url"`
	// APIKey is sent as a bearer token; placeholders ({env.VAR}) expand.
	APIKey string `json:"api_key,omitempty"`
	// Model is the moderation model asked for (omitted when empty).
	Model string `json:"model,omitempty"`
	// Name is the provider_name a refusal reports. Default "moderation".
	Name string `json:"name,omitempty"`
	// Timeout bounds one moderation call. Default 10s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// FailOpen serves requests unmoderated when the provider cannot
	// answer; by default they are refused with 503.
	FailOpen bool `json:"fail_open,omitempty"`
	// Price is what one moderation call costs the caller, in credits, as
	// an exact decimal ("0.0001"); unset: moderation is free. It is
	// charged with the request a clean verdict lets through.
	Price string `json:"price,omitempty"`
}

// Service is a provisioned moderation provider.
type Service struct {
	url, key, model, name string
	failOpen              bool
	price                 money.Amount // per call, charged with the request
	client                *http.Client
}

// Provider is implemented by a Gateway with a moderation provider (the
// tollgate app's moderation block).
type Provider interface {
	ModerationService() *Service
}

// Build checks the config and makes the provider; nil config: none.
func (c *Config) Build(repl *caddy.Replacer) (*Service, error) {
	if c == nil {
		return nil, nil
	}
	base := strings.TrimSuffix(c.BaseURL, "/")
	if repl != nil {
		base = repl.ReplaceAll(base, "")
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("moderation: base_url: expected an http(s) URL, got %q", c.BaseURL)
	}
	if c.Timeout < 0 {
		return nil, fmt.Errorf("moderation: timeout: must not be negative")
	}
	price, err := c.PriceAmount()
	if err != nil {
		return nil, err
	}
	m := &Service{url: base + "/moderations", key: c.APIKey, model: c.Model, name: c.Name, failOpen: c.FailOpen, price: price}
	if repl != nil {
		m.key = repl.ReplaceAll(m.key, "")
	}
	if m.name == "" {
		m.name = "moderation"
	}
	timeout := time.Duration(c.Timeout)
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	m.client = &http.Client{Timeout: timeout}
	return m, nil
}

// PriceAmount parses Price: a non-negative decimal of credits with no
// more precision than a nano-credit, so that the charge is exactly the
// price; unset is free.
func (c *Config) PriceAmount() (money.Amount, error) {
	if c.Price == "" {
		return 0, nil
	}
	p, err := billing.ParsePrice(c.Price)
	if err != nil || p%femtoPerNanoCredit != 0 {
		return 0, fmt.Errorf("moderation: price: expected a non-negative decimal of credits with at most 9 decimal places, got %q", c.Price)
	}
	return money.Amount(p / femtoPerNanoCredit), nil
}

// femtoPerNanoCredit converts a billing.Price to nano-credits.
const femtoPerNanoCredit = 1_000_000

// flaggedInputMax bounds the flagged text a refusal echoes.
const flaggedInputMax = 100

// maxModerationAnswer bounds the provider's answer read.
const maxModerationAnswer = 1 << 20

// errModerationDown is a moderation call that got no usable answer.
var errModerationDown = errors.New("moderation provider unavailable")

// verdict is the moderation provider's answer: the first flagged input
// and its categories.
type verdict struct {
	flagged bool
	reasons []string
	input   string
}

// check asks the provider about texts.
func (m *Service) check(ctx context.Context, texts []string) (verdict, error) {
	req := map[string]any{"input": texts}
	if m.model != "" {
		req["model"] = m.model
	}
	body, _ := json.Marshal(req)
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, m.url, bytes.NewReader(body))
	if err != nil {
		return verdict{}, errModerationDown
	}
	r.Header.Set("Content-Type", "application/json")
	if m.key != "" {
		r.Header.Set("Authorization", "Bearer "+m.key)
	}
	res, err := m.client.Do(r)
	if err != nil {
		return verdict{}, errModerationDown
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxModerationAnswer))
	if err != nil || res.StatusCode != http.StatusOK || !gjson.ValidBytes(b) {
		return verdict{}, errModerationDown
	}
	results := gjson.GetBytes(b, "results")
	if !results.IsArray() || len(results.Array()) != len(texts) {
		return verdict{}, errModerationDown
	}
	// An answer is a verdict on every input, or none: a result without a
	// boolean flagged is a provider that did not answer.
	list := results.Array()
	for _, res := range list {
		if f := res.Get("flagged"); f.Type != gjson.True && f.Type != gjson.False {
			return verdict{}, errModerationDown
		}
	}
	var v verdict
	for i, res := range list {
		if res.Get("flagged").Type != gjson.True {
			continue
		}
		v.flagged, v.input = true, texts[i]
		res.Get("categories").ForEach(func(k, on gjson.Result) bool {
			if on.Bool() {
				v.reasons = append(v.reasons, k.Str)
			}
			return true
		})
		slices.Sort(v.reasons)
		break
	}
	return v, nil
}

// call is a request's planned moderation.
type call struct {
	s     *Service
	texts []string
	slug  string       // the model the refusal names
	cost  money.Amount // the price; 0 once the call had no verdict
	// logger logs a provider that did not answer.
	logger *zap.Logger
}

// Hold implements plugin.Coster: the price.
func (c *call) Hold() money.Amount { return c.s.price }

// Charge implements plugin.Coster: the price once a verdict was had.
func (c *call) Charge() money.Amount { return c.cost }

// Admit implements plugin.Admitter: it asks the provider. nil lets the
// request through (clean, or down under fail_open, which also drops the
// price); otherwise the refusal.
func (c *call) Admit(ctx context.Context) *plugin.Refusal {
	m := c.s
	v, err := m.check(ctx, c.texts)
	if err != nil {
		c.cost = 0
		if m.failOpen {
			c.logger.Warn("moderation provider unavailable; serving unmoderated (fail_open)", zap.String("provider", m.name))
			return nil
		}
		c.logger.Warn("moderation provider unavailable; request refused", zap.String("provider", m.name))
		return &plugin.Refusal{Err: apierror.New(http.StatusServiceUnavailable, "The moderation provider is unavailable; the request was not sent"),
			Model: c.slug, Provider: m.name}
	}
	if !v.flagged {
		return nil
	}
	reasons := v.reasons
	if reasons == nil {
		reasons = []string{}
	}
	return &plugin.Refusal{Err: &apierror.Error{Status: http.StatusForbidden,
		Message: c.slug + " requires moderation on " + m.name + ". Your input was flagged for " + strings.Join(reasons, ", "),
		Metadata: map[string]any{"reasons": reasons, "flagged_input": truncateRunes(v.input, flaggedInputMax),
			"provider_name": m.name, "model_slug": c.slug}},
		Model: c.slug, Provider: m.name}
}

// truncateRunes cuts s to at most n runes, marking the cut.
func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for k := range s {
		if i == n {
			return s[:k] + "..."
		}
		i++
	}
	return s
}

// Interface guards
var (
	_ plugin.Plugin         = (*Moderation)(nil)
	_ caddy.Provisioner     = (*Moderation)(nil)
	_ caddyfile.Unmarshaler = (*Moderation)(nil)
	_ plugin.Coster         = (*call)(nil)
	_ plugin.Admitter       = (*call)(nil)
)
