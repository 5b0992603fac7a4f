package routing

import (
	"net/http"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/policy"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// A BYOK credential's declared_zdr overrides the provider's ZDR fact for
// the attempts it serves: true meets a ZDR requirement on a retaining
// provider, false fails it on a ZDR one, null keeps the catalog's fact.
func TestAttemptEndpointBYOKDeclaredZDR(t *testing.T) {
	yes, no := true, false
	plain := &catalog.Provider{Name: "plain"}
	zdr := &catalog.Provider{Name: "zdr", DataPolicy: catalog.DataPolicy{ZDR: true, NoDataCollection: true, NoPublication: true}}
	m := &catalog.Model{ID: "openai/gpt", Pricing: billing.Pricing{Prompt: 1}, Providers: []*catalog.Provider{plain, zdr}}
	g := &storage.Guardrail{ID: "g", Name: "ZDR", EnforceZDROpenAI: &yes}
	rules := &storage.Rules{Guardrails: []storage.AppliedGuardrail{{Scope: storage.ScopeAPIKey, Guardrail: g}}}
	for _, tt := range []struct {
		name string
		a    upstream.Attempt
		kept bool
	}{
		{"byok declared zdr on a retaining provider", upstream.Attempt{Model: m, Provider: plain, BYOK: true, DeclaredZDR: &yes}, true},
		{"byok declared non-zdr on a zdr provider", upstream.Attempt{Model: m, Provider: zdr, BYOK: true, DeclaredZDR: &no}, false},
		{"byok null: the provider's fact", upstream.Attempt{Model: m, Provider: zdr, BYOK: true}, true},
		{"byok null on a retaining provider", upstream.Attempt{Model: m, Provider: plain, BYOK: true}, false},
		{"operator's key: no declaration applies", upstream.Attempt{Model: m, Provider: plain, DeclaredZDR: &yes}, false},
	} {
		out, refused := policy.AllowedEndpoints(rules, []upstream.Attempt{tt.a}, attemptEndpoint)
		if kept := len(out) == 1; kept != tt.kept {
			t.Errorf("%s: kept %v (%v), want %v", tt.name, kept, refused, tt.kept)
		}
	}
}

// A private endpoint, named as a provider, is the account's own deployment.
func TestAttemptEndpointPrivate(t *testing.T) {
	m := &catalog.Model{ID: "acme/m"}
	if e := attemptEndpoint(upstream.Attempt{Model: m, Provider: &catalog.Provider{Name: privateProviderPrefix + "ep1"}}); !e.Own {
		t.Errorf("private endpoint: %+v", e)
	}
	if e := attemptEndpoint(upstream.Attempt{Model: m, Provider: &catalog.Provider{Name: "acme"}}); e.Own {
		t.Errorf("catalog provider: %+v", e)
	}
}

// A policy refusal reaches the client as the same status, message and
// metadata.
func TestRefusalError(t *testing.T) {
	if RefusalError(nil) != nil {
		t.Fatal("no refusal made an error")
	}
	g := &storage.Guardrail{ID: "g1", Name: "Only b", AllowedModels: []string{"b"}}
	rules := &storage.Rules{Guardrails: []storage.AppliedGuardrail{{Scope: storage.ScopeAPIKey, Guardrail: g}}}
	apiErr := RefusalError(policy.CheckModel(rules, "m"))
	if apiErr == nil || apiErr.Status != http.StatusForbidden || apiErr.Message != `Model "m" is not allowed by guardrail "Only b"` ||
		apiErr.Metadata["guardrail_id"] != "g1" || apiErr.Metadata["guardrail_name"] != "Only b" {
		t.Fatalf("%+v", apiErr)
	}
}
