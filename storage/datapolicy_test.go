package storage

import (
	"strings"
	"testing"
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
		g    Guardrail
		e    Endpoint
		want string // "" admits; else a substring of the reason
	}{
		{"no policy admits anything", Guardrail{}, paid, ""},
		{"null flags restrict nothing", Guardrail{EnableFreeModelTraining: nil, EnforceZDR: nil}, free, ""},
		{"enforce_zdr false restricts nothing", Guardrail{EnforceZDR: &no}, paid, ""},
		{"enforce_zdr needs zdr", Guardrail{EnforceZDR: &yes}, paid, "zero data retention required"},
		{"enforce_zdr met", Guardrail{EnforceZDR: &yes}, zdr, ""},
		{"no facts: not zdr", Guardrail{EnforceZDR: &yes}, Endpoint{Model: "m"}, "zero data retention required"},
		{"other applies to an id without author", Guardrail{EnforceZDROther: &yes}, Endpoint{Model: "tollgate-mock"}, "zero data retention required"},
		{"other does not apply to openai", Guardrail{EnforceZDROther: &yes}, Endpoint{Model: "openai/gpt-4o"}, ""},
		{"openai applies to openai", Guardrail{EnforceZDROpenAI: &yes}, Endpoint{Model: "openai/gpt-4o"}, "zero data retention required"},
		{"anthropic", Guardrail{EnforceZDRAnthropic: &yes}, Endpoint{Model: "Anthropic/claude"}, "zero data retention required"},
		{"google", Guardrail{EnforceZDRGoogle: &yes}, Endpoint{Model: "google/gemini"}, "zero data retention required"},
		{"x-ai", Guardrail{EnforceZDRXAI: &yes}, Endpoint{Model: "x-ai/grok"}, "zero data retention required"},
		{"xai", Guardrail{EnforceZDRXAI: &yes}, Endpoint{Model: "xai/grok"}, "zero data retention required"},
		{"per-author false overrides enforce_zdr", Guardrail{EnforceZDR: &yes, EnforceZDROpenAI: &no}, Endpoint{Model: "openai/gpt-4o"}, ""},
		{"enforce_zdr fills a null per-author field", Guardrail{EnforceZDR: &yes, EnforceZDROpenAI: &no}, Endpoint{Model: "google/gemini"}, "zero data retention required"},
		{"paid training refused", Guardrail{EnablePaidModelTraining: &no}, paid, "paid endpoints that train"},
		{"paid training: free endpoint unaffected", Guardrail{EnablePaidModelTraining: &no}, free, ""},
		{"paid training allowed", Guardrail{EnablePaidModelTraining: &yes}, paid, ""},
		{"paid training: non-collecting provider", Guardrail{EnablePaidModelTraining: &no}, clean, ""},
		{"paid training: zdr provider", Guardrail{EnablePaidModelTraining: &no}, Endpoint{Model: "m", ZDR: true, Trains: true}, ""},
		{"free training refused", Guardrail{EnableFreeModelTraining: &no}, free, "free endpoints that train"},
		{"free training: paid endpoint unaffected", Guardrail{EnableFreeModelTraining: &no}, paid, ""},
		{"free publication refused", Guardrail{EnableFreeModelPublication: &no}, free, "free endpoints that publish prompts"},
		{"free publication: paid endpoint unaffected", Guardrail{EnableFreeModelPublication: &no}, paid, ""},
		{"free publication: non-publishing provider", Guardrail{EnableFreeModelPublication: &no}, Endpoint{Model: "m:free", Free: true, Trains: true}, ""},
		{"region: default global refused", Guardrail{AllowedDataRegions: []string{"europe"}}, paid, "data region global is not in allowed_data_regions (europe)"},
		{"region met", Guardrail{AllowedDataRegions: []string{"europe", "us"}}, Endpoint{Model: "m", Region: "us"}, ""},
		{"region: global listed", Guardrail{AllowedDataRegions: []string{"global"}}, paid, ""},
		{"region: zdr does not help", Guardrail{AllowedDataRegions: []string{"us"}}, zdr, "data region global"},
		{"own deployment meets everything", Guardrail{EnforceZDR: &yes, EnablePaidModelTraining: &no, AllowedDataRegions: []string{"us"}}, own, ""},
	}
	for _, tt := range tests {
		got := tt.g.DataPolicyViolation(tt.e)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: violation %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestDataPolicyBlockerEveryGuardrailMustAdmit(t *testing.T) {
	yes, no := true, false
	a := &Guardrail{Name: "a", EnablePaidModelTraining: &yes}
	b := &Guardrail{Name: "b", EnforceZDR: &yes}
	c := &Guardrail{Name: "c", EnablePaidModelTraining: &no}
	r := &Rules{Guardrails: []AppliedGuardrail{{ScopeWorkspaceDefault, a}, {ScopeMember, b}, {ScopeAPIKey, c}}}
	if g, why := r.DataPolicyBlocker(Endpoint{Model: "m", Trains: true}); g != b || why != "zero data retention required" {
		t.Errorf("blocker = %v %q, want b (the first that refuses)", g, why)
	}
	if g, why := r.DataPolicyBlocker(Endpoint{Model: "m", ZDR: true}); g != nil {
		t.Errorf("zdr endpoint blocked by %v: %q", g.Name, why)
	}
	r.Guardrails = r.Guardrails[:1]
	if g, _ := r.DataPolicyBlocker(Endpoint{Model: "m", Trains: true}); g != nil {
		t.Errorf("blocked by %v", g.Name)
	}
	var none *Rules
	if g, _ := none.DataPolicyBlocker(Endpoint{}); g != nil {
		t.Error("nil rules block")
	}
}

func TestRulesAllowedDataRegions(t *testing.T) {
	guardrail := func(regions ...string) AppliedGuardrail {
		return AppliedGuardrail{ScopeAPIKey, &Guardrail{AllowedDataRegions: regions}}
	}
	tests := []struct {
		name string
		r    *Rules
		want string
	}{
		{"no rules", nil, "global,europe,us"},
		{"no guardrail", &Rules{}, "global,europe,us"},
		{"a guardrail without regions", &Rules{Guardrails: []AppliedGuardrail{guardrail()}}, "global,europe,us"},
		{"one list, in the API's order", &Rules{Guardrails: []AppliedGuardrail{guardrail("us", "global")}}, "global,us"},
		{"letter case as the router compares", &Rules{Guardrails: []AppliedGuardrail{guardrail("EUROPE")}}, "europe"},
		{"intersection", &Rules{Guardrails: []AppliedGuardrail{guardrail("europe", "us"), guardrail(), guardrail("us", "global")}}, "us"},
		{"disjoint lists admit none", &Rules{Guardrails: []AppliedGuardrail{guardrail("europe"), guardrail("us")}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.r.AllowedDataRegions()
			if got == nil {
				t.Fatal("nil, want a list")
			}
			if strings.Join(got, ",") != tt.want {
				t.Errorf("AllowedDataRegions() = %v, want %s", got, tt.want)
			}
			// The router's decision agrees for every region.
			for _, region := range DataRegions {
				g, _ := tt.r.DataPolicyBlocker(Endpoint{Model: "m", ZDR: true, Region: region})
				if admitted := strings.Contains(","+tt.want+",", ","+region+","); admitted != (g == nil) {
					t.Errorf("region %s: reported %v, router admits %v", region, admitted, g == nil)
				}
			}
		})
	}
}
