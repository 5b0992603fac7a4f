package storage

import "strings"

// Data policies: the guardrail fields that restrict where a prompt may go
// by what the provider endpoint does with it (enforce_zdr*,
// enable_*_training, enable_free_model_publication, allowed_data_regions).
// The facts about an endpoint come from the operator's catalog; the
// decision is made here, from memory, for each candidate endpoint.

// Endpoint describes one candidate endpoint for the data-policy decision.
type Endpoint struct {
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

// ZDRRequired reports whether the guardrail requires zero data retention
// for the model: its author's enforce_zdr_* field, or enforce_zdr
// (deprecated) when that field is null.
func (g *Guardrail) ZDRRequired(model string) bool {
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
func (g *Guardrail) DataPolicyViolation(e Endpoint) string {
	if e.Own {
		return ""
	}
	zdr := e.ZDR
	region := e.Region
	if region == "" {
		region = "global"
	}
	switch {
	case !zdr && g.ZDRRequired(e.Model):
		return "zero data retention required"
	case !zdr && e.Trains && e.Free && isFalse(g.EnableFreeModelTraining):
		return "free endpoints that train on request data are not allowed"
	case !zdr && e.Trains && !e.Free && isFalse(g.EnablePaidModelTraining):
		return "paid endpoints that train on request data are not allowed"
	case !zdr && e.Publishes && e.Free && isFalse(g.EnableFreeModelPublication):
		return "free endpoints that publish prompts are not allowed"
	case !g.AllowsRegion(region):
		return "data region " + region + " is not in allowed_data_regions (" + strings.Join(g.AllowedDataRegions, ", ") + ")"
	}
	return ""
}

func isFalse(b *bool) bool { return b != nil && !*b }

// DataRegions are the regions a provider can be stated to run in, in the
// order the public API lists them.
var DataRegions = [...]string{"global", "europe", "us"}

// AllowsRegion reports whether the guardrail admits providers in region:
// an empty allowed_data_regions admits every region.
func (g *Guardrail) AllowsRegion(region string) bool {
	return len(g.AllowedDataRegions) == 0 || containsFold(g.AllowedDataRegions, region)
}

// AllowedDataRegions returns the regions whose providers every guardrail
// admits, in the order of DataRegions: all of them when none restricts
// regions, none when their lists do not overlap. It is what GET /key
// reports, from the same test that removes providers from the candidates.
func (r *Rules) AllowedDataRegions() []string {
	out := make([]string, 0, len(DataRegions))
	for _, region := range DataRegions {
		if r.admitsRegion(region) {
			out = append(out, region)
		}
	}
	return out
}

func (r *Rules) admitsRegion(region string) bool {
	if r == nil {
		return true
	}
	for _, a := range r.Guardrails {
		if !a.Guardrail.AllowsRegion(region) {
			return false
		}
	}
	return true
}

// DataPolicyBlocker returns the first guardrail whose data policy the
// endpoint does not meet, and the policy; nil when every guardrail admits
// it.
func (r *Rules) DataPolicyBlocker(e Endpoint) (*Guardrail, string) {
	if r == nil {
		return nil, ""
	}
	for _, a := range r.Guardrails {
		if why := a.Guardrail.DataPolicyViolation(e); why != "" {
			return a.Guardrail, why
		}
	}
	return nil, ""
}
