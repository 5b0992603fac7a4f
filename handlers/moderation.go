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

	"github.com/tollgate-dev/caddy-tollgate/contentfilter"
	"github.com/tollgate-dev/caddy-tollgate/handlers/apierror"
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
}

// Moderation is a provisioned moderation provider.
type Moderation struct {
	url, key, model, name string
	failOpen              bool
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
	m := &Moderation{url: base + "/moderations", key: c.APIKey, model: c.Model, name: c.Name, failOpen: c.FailOpen}
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
	var v verdict
	for i, res := range results.Array() {
		if !res.Get("flagged").Bool() {
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

// moderate runs the moderation the request needs (its model's switch or
// the moderation plugin) on its text, after the content filters: a
// flagged input is a 403 and nothing reaches the model's provider.
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
	texts := contentfilter.Texts(body)
	if len(texts) == 0 {
		return nil
	}
	v, err := m.check(r.Context(), texts)
	if err != nil {
		if m.failOpen {
			t.logger.Warn("moderation provider unavailable; serving unmoderated (fail_open)", zap.String("provider", m.name))
			return nil
		}
		t.logger.Warn("moderation provider unavailable; request refused", zap.String("provider", m.name))
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
		Message: slug + " requires moderation on " + m.name + ". Your input was flagged for " + strings.Join(reasons, ", "),
		Metadata: map[string]any{"reasons": reasons, "flagged_input": truncateRunes(v.input, flaggedInputMax),
			"provider_name": m.name, "model_slug": slug}}
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
