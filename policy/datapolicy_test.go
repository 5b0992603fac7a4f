package policy

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/storage"
)

func TestDataPolicyViolation(t *testing.T) {
	yes, no := true, false
	paid := Endpoint{Model: "acme/m", Trains: true, Publishes: true}
	free := Endpoint{Model: "acme/m:free", Free: true, Trains: true, Publishes: true}
	zdr := Endpoint{Model: "acme/m", ZDR: true}
	clean := Endpoint{Model: "acme/m", Region: "global"} // no collection, no publication
	own := Endpoint{Model: "acme/m", Own: true, Trains: true, Publishes: true, Region: "global"}
	tests := []struct {
		name string
		g    storage.Guardrail
		e    Endpoint
		want string // "" admits; else a substring of the reason
	}{
		{"no policy admits anything", storage.Guardrail{}, paid, ""},
		{"null flags restrict nothing", storage.Guardrail{EnableFreeModelTraining: nil, EnforceZDR: nil}, free, ""},
		{"enforce_zdr false restricts nothing", storage.Guardrail{EnforceZDR: &no}, paid, ""},
		{"enforce_zdr needs zdr", storage.Guardrail{EnforceZDR: &yes}, paid, "zero data retention required"},
		{"enforce_zdr met", storage.Guardrail{EnforceZDR: &yes}, zdr, ""},
		{"no facts: not zdr", storage.Guardrail{EnforceZDR: &yes}, Endpoint{Model: "m"}, "zero data retention required"},
		{"other applies to an id without author", storage.Guardrail{EnforceZDROther: &yes}, Endpoint{Model: "tollgate-mock"}, "zero data retention required"},
		{"other does not apply to openai", storage.Guardrail{EnforceZDROther: &yes}, Endpoint{Model: "openai/gpt-4o"}, ""},
		{"openai applies to openai", storage.Guardrail{EnforceZDROpenAI: &yes}, Endpoint{Model: "openai/gpt-4o"}, "zero data retention required"},
		{"anthropic", storage.Guardrail{EnforceZDRAnthropic: &yes}, Endpoint{Model: "Anthropic/claude"}, "zero data retention required"},
		{"google", storage.Guardrail{EnforceZDRGoogle: &yes}, Endpoint{Model: "google/gemini"}, "zero data retention required"},
		{"x-ai", storage.Guardrail{EnforceZDRXAI: &yes}, Endpoint{Model: "x-ai/grok"}, "zero data retention required"},
		{"xai", storage.Guardrail{EnforceZDRXAI: &yes}, Endpoint{Model: "xai/grok"}, "zero data retention required"},
		{"per-author false overrides enforce_zdr", storage.Guardrail{EnforceZDR: &yes, EnforceZDROpenAI: &no}, Endpoint{Model: "openai/gpt-4o"}, ""},
		{"enforce_zdr fills a null per-author field", storage.Guardrail{EnforceZDR: &yes, EnforceZDROpenAI: &no}, Endpoint{Model: "google/gemini"}, "zero data retention required"},
		{"paid training refused", storage.Guardrail{EnablePaidModelTraining: &no}, paid, "paid endpoints that train"},
		{"paid training: free endpoint unaffected", storage.Guardrail{EnablePaidModelTraining: &no}, free, ""},
		{"paid training allowed", storage.Guardrail{EnablePaidModelTraining: &yes}, paid, ""},
		{"paid training: non-collecting provider", storage.Guardrail{EnablePaidModelTraining: &no}, clean, ""},
		{"paid training: zdr provider", storage.Guardrail{EnablePaidModelTraining: &no}, Endpoint{Model: "m", ZDR: true, Trains: true}, ""},
		{"free training refused", storage.Guardrail{EnableFreeModelTraining: &no}, free, "free endpoints that train"},
		{"free training: paid endpoint unaffected", storage.Guardrail{EnableFreeModelTraining: &no}, paid, ""},
		{"free publication refused", storage.Guardrail{EnableFreeModelPublication: &no}, free, "free endpoints that publish prompts"},
		{"free publication: paid endpoint unaffected", storage.Guardrail{EnableFreeModelPublication: &no}, paid, ""},
		{"free publication: non-publishing provider", storage.Guardrail{EnableFreeModelPublication: &no}, Endpoint{Model: "m:free", Free: true, Trains: true}, ""},
		{"region: default global refused", storage.Guardrail{AllowedDataRegions: []string{"europe"}}, paid, "data region global is not in allowed_data_regions (europe)"},
		{"region met", storage.Guardrail{AllowedDataRegions: []string{"europe", "us"}}, Endpoint{Model: "m", Region: "us"}, ""},
		{"region: global listed", storage.Guardrail{AllowedDataRegions: []string{"global"}}, paid, ""},
		{"region: zdr does not help", storage.Guardrail{AllowedDataRegions: []string{"us"}}, zdr, "data region global"},
		{"own deployment meets everything", storage.Guardrail{EnforceZDR: &yes, EnablePaidModelTraining: &no, AllowedDataRegions: []string{"us"}}, own, ""},
	}
	for _, tt := range tests {
		got := DataPolicyViolation(&tt.g, tt.e)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: violation %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestDataPolicyBlockerEveryGuardrailMustAdmit(t *testing.T) {
	yes, no := true, false
	a := &storage.Guardrail{Name: "a", EnablePaidModelTraining: &yes}
	b := &storage.Guardrail{Name: "b", EnforceZDR: &yes}
	c := &storage.Guardrail{Name: "c", EnablePaidModelTraining: &no}
	r := &storage.Rules{Guardrails: []storage.AppliedGuardrail{{Scope: storage.ScopeWorkspaceDefault, Guardrail: a}, {Scope: storage.ScopeMember, Guardrail: b}, {Scope: storage.ScopeAPIKey, Guardrail: c}}}
	if g, why := DataPolicyBlocker(r, Endpoint{Model: "m", Trains: true}); g != b || why != "zero data retention required" {
		t.Errorf("blocker = %v %q, want b (the first that refuses)", g, why)
	}
	if g, why := DataPolicyBlocker(r, Endpoint{Model: "m", ZDR: true}); g != nil {
		t.Errorf("zdr endpoint blocked by %v: %q", g.Name, why)
	}
	r.Guardrails = r.Guardrails[:1]
	if g, _ := DataPolicyBlocker(r, Endpoint{Model: "m", Trains: true}); g != nil {
		t.Errorf("blocked by %v", g.Name)
	}
	var none *storage.Rules
	if g, _ := DataPolicyBlocker(none, Endpoint{}); g != nil {
		t.Error("nil rules block")
	}
}

func TestRulesAllowedDataRegions(t *testing.T) {
	guardrail := func(regions ...string) storage.AppliedGuardrail {
		return storage.AppliedGuardrail{Scope: storage.ScopeAPIKey, Guardrail: &storage.Guardrail{AllowedDataRegions: regions}}
	}
	tests := []struct {
		name string
		r    *storage.Rules
		want string
	}{
		{"no rules", nil, "global,europe,us"},
		{"no guardrail", &storage.Rules{}, "global,europe,us"},
		{"a guardrail without regions", &storage.Rules{Guardrails: []storage.AppliedGuardrail{guardrail()}}, "global,europe,us"},
		{"one list, in the API's order", &storage.Rules{Guardrails: []storage.AppliedGuardrail{guardrail("us", "global")}}, "global,us"},
		{"letter case as the router compares", &storage.Rules{Guardrails: []storage.AppliedGuardrail{guardrail("EUROPE")}}, "europe"},
		{"intersection", &storage.Rules{Guardrails: []storage.AppliedGuardrail{guardrail("europe", "us"), guardrail(), guardrail("us", "global")}}, "us"},
		{"disjoint lists admit none", &storage.Rules{Guardrails: []storage.AppliedGuardrail{guardrail("europe"), guardrail("us")}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AllowedDataRegions(tt.r)
			if got == nil {
				t.Fatal("nil, want a list")
			}
			if strings.Join(got, ",") != tt.want {
				t.Errorf("AllowedDataRegions() = %v, want %s", got, tt.want)
			}
			// The router's decision agrees for every region.
			for _, region := range DataRegions {
				g, _ := DataPolicyBlocker(tt.r, Endpoint{Model: "m", ZDR: true, Region: region})
				if admitted := strings.Contains(","+tt.want+",", ","+region+","); admitted != (g == nil) {
					t.Errorf("region %s: reported %v, router admits %v", region, admitted, g == nil)
				}
			}
		})
	}
}
