package handlers

import (
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/handlers/billing"
	"github.com/tollgate-dev/caddy-tollgate/handlers/catalog"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

func TestAllowedAttemptsDataPolicy(t *testing.T) {
	yes, no := true, false
	plain := &catalog.Provider{Name: "plain"}
	zdr := &catalog.Provider{Name: "zdr", DataPolicy: catalog.DataPolicy{ZDR: true, NoDataCollection: true, NoPublication: true}}
	eu := &catalog.Provider{Name: "eu", DataPolicy: catalog.DataPolicy{NoDataCollection: true, Region: "europe"}}
	private := &catalog.Provider{Name: privateProviderPrefix + "ep1"}
	m := &catalog.Model{ID: "acme/m", Pricing: billing.Pricing{Prompt: 1}, Providers: []*catalog.Provider{plain, zdr, eu}}
	attempts := func(ps ...*catalog.Provider) []Attempt {
		var out []Attempt
		for _, p := range ps {
			out = append(out, Attempt{Model: m, Provider: p})
		}
		return out
	}
	names := func(as []Attempt) (s []string) {
		for _, a := range as {
			s = append(s, a.Provider.Name)
		}
		return s
	}
	g := &storage.Guardrail{ID: "g1", Name: "ZDR only", EnforceZDR: &yes}
	rules := &storage.Rules{Guardrails: []storage.AppliedGuardrail{{Scope: storage.ScopeAPIKey, Guardrail: g}}}

	out, apiErr := allowedAttempts(rules, attempts(plain, zdr, eu, private))
	if apiErr != nil || len(out) != 2 || out[0].Provider != zdr || out[1].Provider != private {
		t.Fatalf("zdr: kept %v, %v (want zdr and the private endpoint)", names(out), apiErr)
	}
	_, apiErr = allowedAttempts(rules, attempts(plain, eu))
	if apiErr == nil || apiErr.Status != 403 ||
		apiErr.Message != `Provider "eu" does not meet guardrail "ZDR only": zero data retention required` ||
		apiErr.Metadata["guardrail_id"] != "g1" {
		t.Fatalf("none left: %+v", apiErr)
	}

	// Every guardrail must admit: a second one limiting regions leaves
	// none of zdr (global) and eu (not zdr).
	g.EnforceZDR = nil
	g.EnablePaidModelTraining = &no
	r2 := &storage.Guardrail{ID: "g2", Name: "EU", AllowedDataRegions: []string{"europe"}}
	rules.Guardrails = append(rules.Guardrails, storage.AppliedGuardrail{Scope: storage.ScopeMember, Guardrail: r2})
	out, apiErr = allowedAttempts(rules, attempts(plain, zdr, eu))
	if apiErr != nil || len(out) != 1 || out[0].Provider != eu {
		t.Fatalf("no training + europe: kept %v, %v", names(out), apiErr)
	}
	_, apiErr = allowedAttempts(rules, attempts(plain, zdr))
	if apiErr == nil || apiErr.Message != `Provider "zdr" does not meet guardrail "EU": data region global is not in allowed_data_regions (europe)` {
		t.Fatalf("none left: %+v", apiErr)
	}

	// The model lists follow the same decision.
	all := func(*catalog.Provider) (bool, *bool) { return true, nil }
	if !admitsModel(rules, m, all) {
		t.Error("model with an admitted provider hidden")
	}
	if admitsModel(rules, m, func(p *catalog.Provider) (bool, *bool) { return p != eu, nil }) {
		t.Error("model listed though its only usable providers violate a data policy")
	}
	g.EnablePaidModelTraining = nil
	r2.AllowedDataRegions = nil
	if out, apiErr := allowedAttempts(rules, attempts(plain, zdr, eu)); apiErr != nil || len(out) != 3 {
		t.Fatalf("policies lifted: kept %v, %v", names(out), apiErr)
	}
}

func TestEndpointOfFreeness(t *testing.T) {
	p := &catalog.Provider{Name: "p"}
	for _, tt := range []struct {
		m    *catalog.Model
		free bool
	}{
		{&catalog.Model{ID: "a/b:free", Pricing: billing.Pricing{Prompt: 1}}, true},
		{&catalog.Model{ID: "a/b"}, true}, // nothing priced
		{&catalog.Model{ID: "a/b", Pricing: billing.Pricing{Completion: 1}}, false},
	} {
		if e := endpointOf(tt.m, p, nil); e.Free != tt.free || !e.Trains || !e.Publishes || e.ZDR || e.Own {
			t.Errorf("%s: %+v", tt.m.ID, e)
		}
	}
}

// A BYOK credential's declared_zdr overrides the provider's ZDR fact for
// the attempts it serves: true meets a ZDR requirement on a retaining
// provider, false fails it on a ZDR one, null keeps the catalog's fact.
func TestAllowedAttemptsBYOKDeclaredZDR(t *testing.T) {
	yes, no := true, false
	plain := &catalog.Provider{Name: "plain"}
	zdr := &catalog.Provider{Name: "zdr", DataPolicy: catalog.DataPolicy{ZDR: true, NoDataCollection: true, NoPublication: true}}
	m := &catalog.Model{ID: "openai/gpt", Pricing: billing.Pricing{Prompt: 1}, Providers: []*catalog.Provider{plain, zdr}}
	g := &storage.Guardrail{ID: "g", Name: "ZDR", EnforceZDROpenAI: &yes}
	rules := &storage.Rules{Guardrails: []storage.AppliedGuardrail{{Scope: storage.ScopeAPIKey, Guardrail: g}}}
	for _, tt := range []struct {
		name string
		a    Attempt
		kept bool
	}{
		{"byok declared zdr on a retaining provider", Attempt{Model: m, Provider: plain, BYOK: true, DeclaredZDR: &yes}, true},
		{"byok declared non-zdr on a zdr provider", Attempt{Model: m, Provider: zdr, BYOK: true, DeclaredZDR: &no}, false},
		{"byok null: the provider's fact", Attempt{Model: m, Provider: zdr, BYOK: true}, true},
		{"byok null on a retaining provider", Attempt{Model: m, Provider: plain, BYOK: true}, false},
		{"operator's key: no declaration applies", Attempt{Model: m, Provider: plain, DeclaredZDR: &yes}, false},
	} {
		out, apiErr := allowedAttempts(rules, []Attempt{tt.a})
		if kept := len(out) == 1; kept != tt.kept {
			t.Errorf("%s: kept %v (%v), want %v", tt.name, kept, apiErr, tt.kept)
		}
	}
	byokOn := func(want *catalog.Provider, declared *bool) func(*catalog.Provider) (bool, *bool) {
		return func(p *catalog.Provider) (bool, *bool) { return p == want, declared }
	}
	if !admitsModel(rules, m, byokOn(plain, &yes)) {
		t.Error("model hidden though a ZDR-declared credential reaches it")
	}
	if admitsModel(rules, m, byokOn(zdr, &no)) {
		t.Error("model listed though its only reachable provider is declared non-ZDR")
	}
}
