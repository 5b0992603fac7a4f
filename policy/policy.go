// Package policy decides what a key's guardrails and workspace allow: which
// models and provider endpoints may serve a request (model and provider
// lists, data policies against the catalog's facts), which budgets bind its
// admission, and which data regions it may reach. It decides from plain
// data, all in memory: the key's effective rules (storage.Rules, cached by
// the store), the candidates and the ledger view of a reservation. A
// refusal names the guardrail and the policy that refused.
package policy

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// Refusal is a request the rules do not admit, with the status and body of
// the public API's error.
type Refusal struct {
	Status   int
	Message  string
	Metadata map[string]any
}

func (r *Refusal) Error() string { return r.Message }

// guardrailRefusal is the 403 of a guardrail that refuses a request.
func guardrailRefusal(g *storage.Guardrail, message string) *Refusal {
	return &Refusal{Status: http.StatusForbidden, Message: message,
		Metadata: map[string]any{"guardrail_id": g.ID, "guardrail_name": g.Name}}
}

// CheckModel refuses a model that a guardrail does not admit.
func CheckModel(rules *storage.Rules, modelID string) *Refusal {
	if g := ModelBlocker(rules, modelID); g != nil {
		return guardrailRefusal(g, "Model "+strconv.Quote(modelID)+" is not allowed by guardrail "+strconv.Quote(g.Name))
	}
	return nil
}

// AllowedEndpoints keeps the candidates whose endpoint every guardrail
// admits, by provider and by data policy; when none is left it returns the
// refusal of the guardrail that removed the last. The slice is filtered in
// place.
func AllowedEndpoints[T any](rules *storage.Rules, candidates []T, endpoint func(T) Endpoint) ([]T, *Refusal) {
	if rules == nil || len(rules.Guardrails) == 0 || len(candidates) == 0 {
		return candidates, nil
	}
	var refused *Refusal
	out := candidates[:0]
	for _, c := range candidates {
		if r := endpointRefusal(rules, endpoint(c)); r != nil {
			refused = r
			continue
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, refused
	}
	return out, nil
}

// endpointRefusal is the refusal of the first guardrail that does not
// admit e's provider or whose data policy e does not meet, or nil.
func endpointRefusal(rules *storage.Rules, e Endpoint) *Refusal {
	if g := ProviderBlocker(rules, e.Provider); g != nil {
		return guardrailRefusal(g, "Provider "+strconv.Quote(e.Provider)+" is not allowed by guardrail "+strconv.Quote(g.Name))
	}
	if g, why := DataPolicyBlocker(rules, e); g != nil {
		return guardrailRefusal(g, "Provider "+strconv.Quote(e.Provider)+" does not meet guardrail "+strconv.Quote(g.Name)+": "+why)
	}
	return nil
}

// AdmitsModel reports whether the rules let the caller use m through one
// of the providers it can reach (for the model lists). usable says whether
// the caller reaches a provider, and the declared_zdr of the BYOK
// credential that reaches it (nil for none).
func AdmitsModel(rules *storage.Rules, m *catalog.Model, usable func(*catalog.Provider) (bool, *bool)) bool {
	if rules == nil {
		return true
	}
	if ModelBlocker(rules, m.ID) != nil {
		return false
	}
	for _, p := range m.Providers {
		ok, declaredZDR := usable(p)
		if !ok {
			continue
		}
		e := EndpointOf(m, p, declaredZDR)
		if ProviderBlocker(rules, p.Name) == nil && !blocks(DataPolicyBlocker(rules, e)) {
			return true
		}
	}
	return false
}

func blocks(g *storage.Guardrail, _ string) bool { return g != nil }

// ModelBlocker returns the first guardrail that does not admit the model,
// or nil.
func ModelBlocker(rules *storage.Rules, model string) *storage.Guardrail {
	if rules == nil {
		return nil
	}
	for _, a := range rules.Guardrails {
		if !AllowsModel(a.Guardrail, model) {
			return a.Guardrail
		}
	}
	return nil
}

// ProviderBlocker returns the first guardrail that does not admit the
// provider, or nil.
func ProviderBlocker(rules *storage.Rules, provider string) *storage.Guardrail {
	if rules == nil {
		return nil
	}
	for _, a := range rules.Guardrails {
		if !AllowsProvider(a.Guardrail, provider) {
			return a.Guardrail
		}
	}
	return nil
}

// AllowsModel reports whether the guardrail admits the model id: listed in
// allowed_models (or no list), and not in ignored_models.
func AllowsModel(g *storage.Guardrail, id string) bool {
	if len(g.AllowedModels) > 0 && !containsFold(g.AllowedModels, id) {
		return false
	}
	return !containsFold(g.IgnoredModels, id)
}

// AllowsProvider reports whether the guardrail admits the provider name.
func AllowsProvider(g *storage.Guardrail, name string) bool {
	if len(g.AllowedProviders) > 0 && !containsFold(g.AllowedProviders, name) {
		return false
	}
	return !containsFold(g.IgnoredProviders, name)
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}
