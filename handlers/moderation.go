package handlers

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
	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/contentfilter"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// ModerationConfig is the operator's moderation provider (the tollgate
// app's `moderation` block): an endpoint of OpenAI's /v1/moderations
// shape. The gateway calls it, once per request and before any provider,
// for a model that requires moderation (the model's `moderation` switch)
// and for a request that asks for it with the `moderation` plugin.
type ModerationConfig struct {
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

// Moderation is a provisioned moderation provider.
type Moderation struct {
	url, key, model, name string
	failOpen              bool
	price                 money.Amount // per call, charged with the request
	client                *http.Client
}

// ModerationProvider is implemented by a Gateway with a moderation
// provider.
type ModerationProvider interface {
	ModerationService() *Moderation
}

// Build checks the config and makes the provider; nil config: none.
func (c *ModerationConfig) Build(repl *caddy.Replacer) (*Moderation, error) {
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
	m := &Moderation{url: base + "/moderations", key: c.APIKey, model: c.Model, name: c.Name, failOpen: c.FailOpen, price: price}
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
func (c *ModerationConfig) PriceAmount() (money.Amount, error) {
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
func (m *Moderation) check(ctx context.Context, texts []string) (verdict, error) {
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

// moderate plans the moderation the request needs (its model's switch or
// the moderation plugin), after the content filters: the call itself is
// made by the meter once admission has held the request's cost
// (Meter.moderate), so that a request the caller cannot pay for never
// costs the operator a moderation call.
//
// Charging (the operator's price per call, if set): admission holds it;
// a clean verdict charges it with the answer; a flagged input, refused
// with 403, is still charged it (the call was made: otherwise flagged
// input would be a free moderation service at the operator's expense),
// and its generation record says so. A request refused because the
// provider is down is not charged, nor is one served unmoderated under
// fail_open: no verdict was had.
func (t *Tollgate) moderate(r *http.Request, st *requestState, body []byte) *apierror.Error {
	asked, apiErr := moderationPlugin(body)
	if apiErr != nil {
		return apiErr
	}
	route := st.route
	required := slices.ContainsFunc(route.Attempts, func(a Attempt) bool { return a.Model != nil && a.Model.Moderation })
	if !asked && !required {
		return nil
	}
	// The model the client asked for (a private endpoint's attempt may
	// have no catalog model).
	slug := gjson.GetBytes(body, "model").Str
	if a := route.Attempts[0]; a.Model != nil {
		slug = a.Model.ID
	}
	m := t.moderation
	if m == nil {
		if asked {
			return apierror.BadRequest("plugins: this gateway has no moderation provider (the moderation plugin is not available)")
		}
		return apierror.New(http.StatusServiceUnavailable, "Model "+slug+" requires moderation, and this gateway has no moderation provider")
	}
	if route.parsedFields != nil {
		body = route.body // with the PDFs' text (the file-parser plugin)
	}
	texts := contentfilter.Texts(filterAPI(st), body)
	if len(texts) == 0 {
		return nil
	}
	st.moderation = &moderationCall{m: m, texts: texts, slug: slug}
	st.moderationCost = m.price
	return nil
}

// moderationCall is a request's planned moderation.
type moderationCall struct {
	m     *Moderation
	texts []string
	slug  string // the model the refusal names
}

// run asks the provider: nil lets the request through (clean, or down
// under fail_open, which also drops the price); otherwise the refusal.
func (mc *moderationCall) run(r *http.Request, st *requestState, logger *zap.Logger) *apierror.Error {
	m := mc.m
	v, err := m.check(r.Context(), mc.texts)
	if err != nil {
		st.moderationCost = 0
		if m.failOpen {
			logger.Warn("moderation provider unavailable; serving unmoderated (fail_open)", zap.String("provider", m.name))
			return nil
		}
		logger.Warn("moderation provider unavailable; request refused", zap.String("provider", m.name))
		return apierror.New(http.StatusServiceUnavailable, "The moderation provider is unavailable; the request was not sent")
	}
	if !v.flagged {
		return nil
	}
	reasons := v.reasons
	if reasons == nil {
		reasons = []string{}
	}
	return &apierror.Error{Status: http.StatusForbidden,
		Message: mc.slug + " requires moderation on " + m.name + ". Your input was flagged for " + strings.Join(reasons, ", "),
		Metadata: map[string]any{"reasons": reasons, "flagged_input": truncateRunes(v.input, flaggedInputMax),
			"provider_name": m.name, "model_slug": mc.slug}}
}

// moderate makes an admitted request's moderation call. A refusal
// releases the hold, except that a flagged input is charged the call's
// price (st.moderationCost, zeroed when no verdict was had).
func (m *Meter) moderate(r *http.Request, st *requestState) *apierror.Error {
	began := now()
	apiErr := st.moderation.run(r, st, m.logger)
	if apiErr == nil {
		return nil
	}
	if st.moderationCost == 0 {
		m.release(st, st.res)
		return apiErr
	}
	route, id, price := st.route, st.id, st.moderationCost
	var credits money.Amount // a BYOK request pays the operator's provider in credits
	if route.BYOK {
		credits = price
	}
	gen := &storage.Generation{
		ID: storage.NewGenerationID(began), AccountID: id.AccountID, KeyHash: id.Hash, WorkspaceID: id.Key.WorkspaceID,
		Model: st.moderation.slug, Provider: st.moderation.m.name, Cost: price, BYOK: route.BYOK, Credits: credits,
		Status: "error", FinishReason: "content_filter", LatencyMS: now().Sub(began).Milliseconds(), User: route.User,
		CreatedAt: began.UTC(), ContentFlags: st.contentFlags,
	}
	window := m.gw.InFlightPolicy().SettlementWindow
	if err := st.store.Settle(st.res, storage.Charge{Cost: price, BYOK: route.BYOK, Credits: credits, SettlementWindow: window, Generation: gen}); err != nil {
		// The refusal stands; a shared store lands the charge later.
		m.logger.Error("moderation charge not durable", zap.String("generation", gen.ID), zap.Error(err))
		return apiErr
	}
	observeCharge(st, gen)
	return apiErr
}

// moderationPlugin reports whether the body asks for moderation with the
// plugin; a malformed entry is a 400.
func moderationPlugin(body []byte) (bool, *apierror.Error) {
	// Most bodies never name it: a SIMD search instead of a JSON walk.
	if !bytes.Contains(body, moderationWord) {
		return false, nil
	}
	plugins := gjson.GetBytes(body, "plugins")
	if !plugins.IsArray() {
		return false, nil
	}
	asked := false
	for i, p := range plugins.Array() {
		if p.Get("id").Str != "moderation" || p.Get("enabled").Type == gjson.False {
			continue
		}
		var bad string
		p.ForEach(func(k, _ gjson.Result) bool {
			if k.Str != "id" && k.Str != "enabled" {
				bad = k.Str
			}
			return bad == ""
		})
		if bad != "" {
			return false, apierror.BadRequest(fmt.Sprintf("plugins[%d].%s: unknown field of the moderation plugin", i, bad))
		}
		asked = true
	}
	return asked, nil
}

var moderationWord = []byte("moderation")

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
