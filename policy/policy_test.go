package policy

import (
	"net/http"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// candidate is a test's endpoint candidate: a model served by a provider.
type candidate struct {
	m *catalog.Model
	p *catalog.Provider
}

func (c candidate) endpoint() Endpoint { return EndpointOf(c.m, c.p, nil) }

func candidates(m *catalog.Model, ps ...*catalog.Provider) []candidate {
	var out []candidate
	for _, p := range ps {
		out = append(out, candidate{m, p})
	}
	return out
}

func names(cs []candidate) (s []string) {
	for _, c := range cs {
		s = append(s, c.p.Name)
	}
	return s
}

func keyRules(gs ...*storage.Guardrail) *storage.Rules {
	r := &storage.Rules{}
	for _, g := range gs {
		r.Guardrails = append(r.Guardrails, storage.AppliedGuardrail{Scope: storage.ScopeAPIKey, Guardrail: g})
	}
	return r
}

func TestAllowedEndpointsByProvider(t *testing.T) {
	m := &catalog.Model{ID: "m"}
	a := &catalog.Provider{Name: "a"}
	b := &catalog.Provider{Name: "b"}
	g := &storage.Guardrail{ID: "g1", Name: "Only b", AllowedProviders: []string{"b"}}
	rules := keyRules(g)
	out, refused := AllowedEndpoints(rules, candidates(m, a, b), candidate.endpoint)
	if refused != nil || len(out) != 1 || out[0].p != b {
		t.Fatalf("filtered %v, %v", names(out), refused)
	}
	g.AllowedProviders = []string{"c"}
	_, refused = AllowedEndpoints(rules, candidates(m, a, b), candidate.endpoint)
	if refused == nil || refused.Status != http.StatusForbidden || refused.Message != `Provider "b" is not allowed by guardrail "Only b"` ||
		refused.Metadata["guardrail_id"] != "g1" || refused.Metadata["guardrail_name"] != "Only b" {
		t.Fatalf("none left: %+v", refused)
	}
	if out, refused := AllowedEndpoints(nil, candidates(m, a, b), candidate.endpoint); refused != nil || len(out) != 2 {
		t.Fatal("no rules filter nothing")
	}
	g.AllowedModels = []string{"other"}
	if refused := CheckModel(rules, m.ID); refused == nil || refused.Status != http.StatusForbidden ||
		refused.Message != `Model "m" is not allowed by guardrail "Only b"` || refused.Metadata["guardrail_id"] != "g1" {
		t.Fatalf("model: %+v", refused)
	}
	if refused := CheckModel(nil, m.ID); refused != nil {
		t.Fatalf("no rules refused the model: %+v", refused)
	}
}

// Model and provider lists compare names without letter case; every
// guardrail must admit, and the first that does not is reported.
func TestModelAndProviderBlockers(t *testing.T) {
	g := &storage.Guardrail{Name: "G", AllowedModels: []string{"a/m"}, IgnoredProviders: []string{"bad"}}
	other := &storage.Guardrail{Name: "other", IgnoredModels: []string{"A/M"}}
	rules := keyRules(g)
	if ModelBlocker(rules, "a/m") != nil || ModelBlocker(rules, "A/M") != nil || ModelBlocker(rules, "b/m") != g {
		t.Error("model rule")
	}
	if ProviderBlocker(rules, "good") != nil || ProviderBlocker(rules, "Bad") != g {
		t.Error("provider rule")
	}
	rules = keyRules(&storage.Guardrail{Name: "open"}, other, g)
	if ModelBlocker(rules, "a/m") != other {
		t.Error("not the first guardrail that refuses")
	}
	if ModelBlocker(nil, "x") != nil || ProviderBlocker(nil, "x") != nil {
		t.Error("nil rules block")
	}
}

func TestAllowedEndpointsDataPolicy(t *testing.T) {
	yes, no := true, false
	plain := &catalog.Provider{Name: "plain"}
	zdr := &catalog.Provider{Name: "zdr", DataPolicy: catalog.DataPolicy{ZDR: true, NoDataCollection: true, NoPublication: true}}
	eu := &catalog.Provider{Name: "eu", DataPolicy: catalog.DataPolicy{NoDataCollection: true, Region: "europe"}}
	private := &catalog.Provider{Name: PrivateProviderPrefix + "ep1"}
	m := &catalog.Model{ID: "acme/m", Pricing: billing.Pricing{Prompt: 1}, Providers: []*catalog.Provider{plain, zdr, eu}}
	g := &storage.Guardrail{ID: "g1", Name: "ZDR only", EnforceZDR: &yes}
	rules := keyRules(g)

	out, refused := AllowedEndpoints(rules, candidates(m, plain, zdr, eu, private), candidate.endpoint)
	if refused != nil || len(out) != 2 || out[0].p != zdr || out[1].p != private {
		t.Fatalf("zdr: kept %v, %v (want zdr and the private endpoint)", names(out), refused)
	}
	_, refused = AllowedEndpoints(rules, candidates(m, plain, eu), candidate.endpoint)
	if refused == nil || refused.Status != http.StatusForbidden ||
		refused.Message != `Provider "eu" does not meet guardrail "ZDR only": zero data retention required` ||
		refused.Metadata["guardrail_id"] != "g1" {
		t.Fatalf("none left: %+v", refused)
	}

	// Every guardrail must admit: a second one limiting regions leaves
	// none of zdr (global) and eu (not zdr).
	g.EnforceZDR = nil
	g.EnablePaidModelTraining = &no
	r2 := &storage.Guardrail{ID: "g2", Name: "EU", AllowedDataRegions: []string{"europe"}}
	rules.Guardrails = append(rules.Guardrails, storage.AppliedGuardrail{Scope: storage.ScopeMember, Guardrail: r2})
	out, refused = AllowedEndpoints(rules, candidates(m, plain, zdr, eu), candidate.endpoint)
	if refused != nil || len(out) != 1 || out[0].p != eu {
		t.Fatalf("no training + europe: kept %v, %v", names(out), refused)
	}
	_, refused = AllowedEndpoints(rules, candidates(m, plain, zdr), candidate.endpoint)
	if refused == nil || refused.Message != `Provider "zdr" does not meet guardrail "EU": data region global is not in allowed_data_regions (europe)` {
		t.Fatalf("none left: %+v", refused)
	}

	// The model lists follow the same decision.
	all := func(*catalog.Provider) (bool, *bool) { return true, nil }
	if !AdmitsModel(rules, m, all) {
		t.Error("model with an admitted provider hidden")
	}
	if AdmitsModel(rules, m, func(p *catalog.Provider) (bool, *bool) { return p != eu, nil }) {
		t.Error("model listed though its only usable providers violate a data policy")
	}
	g.EnablePaidModelTraining = nil
	r2.AllowedDataRegions = nil
	if out, refused := AllowedEndpoints(rules, candidates(m, plain, zdr, eu), candidate.endpoint); refused != nil || len(out) != 3 {
		t.Fatalf("policies lifted: kept %v, %v", names(out), refused)
	}
}

// The model lists apply a BYOK credential's declared_zdr to the provider
// it reaches: true meets a ZDR requirement, false fails it.
func TestAdmitsModelDeclaredZDR(t *testing.T) {
	yes, no := true, false
	plain := &catalog.Provider{Name: "plain"}
	zdr := &catalog.Provider{Name: "zdr", DataPolicy: catalog.DataPolicy{ZDR: true, NoDataCollection: true, NoPublication: true}}
	m := &catalog.Model{ID: "openai/gpt", Pricing: billing.Pricing{Prompt: 1}, Providers: []*catalog.Provider{plain, zdr}}
	rules := keyRules(&storage.Guardrail{ID: "g", Name: "ZDR", EnforceZDROpenAI: &yes})
	byokOn := func(want *catalog.Provider, declared *bool) func(*catalog.Provider) (bool, *bool) {
		return func(p *catalog.Provider) (bool, *bool) { return p == want, declared }
	}
	if !AdmitsModel(rules, m, byokOn(plain, &yes)) {
		t.Error("model hidden though a ZDR-declared credential reaches it")
	}
	if AdmitsModel(rules, m, byokOn(zdr, &no)) {
		t.Error("model listed though its only reachable provider is declared non-ZDR")
	}
	if !AdmitsModel(rules, m, byokOn(zdr, nil)) {
		t.Error("model hidden though its ZDR provider is reachable")
	}
	if !AdmitsModel(nil, m, byokOn(nil, nil)) {
		t.Error("no rules hid a model")
	}
	if AdmitsModel(keyRules(&storage.Guardrail{Name: "none", AllowedModels: []string{"x"}}), m, byokOn(zdr, nil)) {
		t.Error("model listed though a guardrail refuses it")
	}
}

func TestEndpointOf(t *testing.T) {
	yes, no := true, false
	p := &catalog.Provider{Name: "p"}
	for _, tt := range []struct {
		m    *catalog.Model
		free bool
	}{
		{&catalog.Model{ID: "a/b:free", Pricing: billing.Pricing{Prompt: 1}}, true},
		{&catalog.Model{ID: "a/b"}, true}, // nothing priced
		{&catalog.Model{ID: "a/b", Pricing: billing.Pricing{Completion: 1}}, false},
	} {
		if e := EndpointOf(tt.m, p, nil); e.Free != tt.free || !e.Trains || !e.Publishes || e.ZDR || e.Own || e.Provider != "p" || e.Model != tt.m.ID {
			t.Errorf("%s: %+v", tt.m.ID, e)
		}
	}
	m := &catalog.Model{ID: "a/b"}
	zdr := &catalog.Provider{Name: "z", DataPolicy: catalog.DataPolicy{ZDR: true, NoDataCollection: true, NoPublication: true, Region: "us"}}
	if e := EndpointOf(m, zdr, nil); !e.ZDR || e.Trains || e.Publishes || e.Region != "us" {
		t.Errorf("catalog facts: %+v", e)
	}
	if e := EndpointOf(m, zdr, &no); e.ZDR {
		t.Errorf("declared non-zdr kept zdr: %+v", e)
	}
	if e := EndpointOf(m, p, &yes); !e.ZDR {
		t.Errorf("declared zdr ignored: %+v", e)
	}
	if e := EndpointOf(m, &catalog.Provider{Name: PrivateProviderPrefix + "x"}, nil); !e.Own {
		t.Errorf("private endpoint not own: %+v", e)
	}
}

func TestRefusalError(t *testing.T) {
	r := CheckModel(keyRules(&storage.Guardrail{Name: "G", AllowedModels: []string{"x"}}), "y")
	if r.Error() != r.Message {
		t.Errorf("Error() = %q, want the message", r.Error())
	}
}
