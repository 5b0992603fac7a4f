package policy

import (
	"strings"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// Data policies: the guardrail fields that restrict where a prompt may go
// by what the provider endpoint does with it (enforce_zdr*,
// enable_*_training, enable_free_model_publication, allowed_data_regions).
// The facts about an endpoint come from the operator's catalog; the
// decision is made here, from memory, for each candidate endpoint.

// PrivateProviderPrefix names a private endpoint as a provider
// ("private:<endpoint id>"): the account's own deployment, which meets
// every data policy.
const PrivateProviderPrefix = "private:"

// Endpoint describes one candidate endpoint for the guardrails' decision.
type Endpoint struct {
	// Provider is the provider's name, for the provider lists.
	Provider string
	// Model is the public model id; its author (the part before "/")
	// selects the enforce_zdr_* field that applies.
	Model string
	// Free: the endpoint is free (a ":free" model), so the free-model
	// training and publication fields apply instead of the paid one.
	Free bool
	// ZDR: the provider retains no prompt or answer (which implies it
	// neither trains on nor publishes them).
	ZDR bool
	// Trains: the provider may train on or retain prompts.
	Trains bool
	// Publishes: the provider may publish prompts.
	Publishes bool
	// Region is where the provider processes requests: global, europe or
	// us.
	Region string
	// Own: the account's own deployment (a private endpoint); it meets
	// every data policy.
	Own bool
}

// EndpointOf states the catalog's data-policy facts of provider p serving
// m. declaredZDR is a BYOK credential's declared_zdr, for an endpoint that
// credential serves: true makes the endpoint ZDR, false makes it not ZDR,
// nil keeps the provider's facts.
func EndpointOf(m *catalog.Model, p *catalog.Provider, declaredZDR *bool) Endpoint {
	dp := p.DataPolicy
	e := Endpoint{
		Provider:  p.Name,
		Model:     m.ID,
		Free:      m.IsFree() || m.Pricing.IsFree(),
		ZDR:       dp.ZDR,
		Trains:    !dp.NoDataCollection,
		Publishes: !dp.NoPublication,
		Region:    dp.Region,
		Own:       strings.HasPrefix(p.Name, PrivateProviderPrefix),
	}
	if declaredZDR != nil {
		e.ZDR = *declaredZDR
	}
	return e
}

// ZDRRequired reports whether the guardrail requires zero data retention
// for the model: its author's enforce_zdr_* field, or enforce_zdr
// (deprecated) when that field is null.
func ZDRRequired(g *storage.Guardrail, model string) bool {
	var f *bool
	switch modelAuthor(model) {
	case "anthropic":
		f = g.EnforceZDRAnthropic
	case "openai":
		f = g.EnforceZDROpenAI
	case "google":
		f = g.EnforceZDRGoogle
	case "x-ai", "xai":
		f = g.EnforceZDRXAI
	default:
		f = g.EnforceZDROther
	}
	if f == nil {
		f = g.EnforceZDR
	}
	return f != nil && *f
}

// modelAuthor is the lower-cased part of a model id before "/", or "" for
// an id without one.
func modelAuthor(model string) string {
	author, _, ok := strings.Cut(model, "/")
	if !ok {
		return ""
	}
	return strings.ToLower(author)
}

// DataPolicyViolation returns the policy of the guardrail that the
// endpoint does not meet, as a phrase for the error message ("zero data
// retention required"), or "" when it meets them all. A null field
// restricts nothing; an empty allowed_data_regions admits every region.
func DataPolicyViolation(g *storage.Guardrail, e Endpoint) string {
	if e.Own {
		return ""
	}
	zdr := e.ZDR
	region := e.Region
	if region == "" {
		region = "global"
	}
	switch {
	case !zdr && ZDRRequired(g, e.Model):
		return "zero data retention required"
	case !zdr && e.Trains && e.Free && isFalse(g.EnableFreeModelTraining):
		return "free endpoints that train on request data are not allowed"
	case !zdr && e.Trains && !e.Free && isFalse(g.EnablePaidModelTraining):
		return "paid endpoints that train on request data are not allowed"
	case !zdr && e.Publishes && e.Free && isFalse(g.EnableFreeModelPublication):
		return "free endpoints that publish prompts are not allowed"
	case !AllowsRegion(g, region):
		return "data region " + region + " is not in allowed_data_regions (" + strings.Join(g.AllowedDataRegions, ", ") + ")"
	}
	return ""
}

func isFalse(b *bool) bool { return b != nil && !*b }

// DataPolicyBlocker returns the first guardrail whose data policy the
// endpoint does not meet, and the policy; nil when every guardrail admits
// it.
func DataPolicyBlocker(rules *storage.Rules, e Endpoint) (*storage.Guardrail, string) {
	if rules == nil {
		return nil, ""
	}
	for _, a := range rules.Guardrails {
		if why := DataPolicyViolation(a.Guardrail, e); why != "" {
			return a.Guardrail, why
		}
	}
	return nil, ""
}

// DataRegions are the regions a provider can be stated to run in, in the
// order the public API lists them.
var DataRegions = [...]string{"global", "europe", "us"}

// AllowsRegion reports whether the guardrail admits providers in region:
// an empty allowed_data_regions admits every region.
func AllowsRegion(g *storage.Guardrail, region string) bool {
	return len(g.AllowedDataRegions) == 0 || containsFold(g.AllowedDataRegions, region)
}

// AllowedDataRegions returns the regions whose providers every guardrail
// admits, in the order of DataRegions: all of them when none restricts
// regions, none when their lists do not overlap. It is what GET /key
// reports, from the same test that removes providers from the candidates.
func AllowedDataRegions(rules *storage.Rules) []string {
	out := make([]string, 0, len(DataRegions))
	for _, region := range DataRegions {
		if admitsRegion(rules, region) {
			out = append(out, region)
		}
	}
	return out
}

func admitsRegion(rules *storage.Rules, region string) bool {
	if rules == nil {
		return true
	}
	for _, a := range rules.Guardrails {
		if !AllowsRegion(a.Guardrail, region) {
			return false
		}
	}
	return true
}
