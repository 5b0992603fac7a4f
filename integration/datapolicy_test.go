package integration

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
)

// withDataPolicyModels adds two models served by the mock through two taps
// that count the calls each receives: acme/split by a provider the
// operator says nothing about ("retain", listed first) and by a
// zero-data-retention one in europe ("zdr"), and acme/retained by
// "retain" alone.
func withDataPolicyModels(t *testing.T, retain, zdr string) func(string) string {
	return func(cfg string) string {
		model := func(id, providers string) string {
			return fmt.Sprintf("\t\tmodel %s {\n\t\t\tpricing {\n\t\t\t\tprompt 0.000001\n\t\t\t\tcompletion 0.000002\n\t\t\t}\n%s\t\t}\n", id, providers)
		}
		retainBlock := fmt.Sprintf("\t\t\tprovider retain http://%s/v1 {\n\t\t\t\tmodel tollgate-mock\n\t\t\t\tapi_key mock\n\t\t\t}\n", retain)
		zdrBlock := fmt.Sprintf("\t\t\tprovider zdr http://%s/v1 {\n\t\t\t\tmodel tollgate-mock\n\t\t\t\tapi_key mock\n\t\t\t\tzdr\n\t\t\t\tregion europe\n\t\t\t}\n", zdr)
		block := model("acme/split", retainBlock+zdrBlock) + model("acme/retained", retainBlock)
		return replaceOnce(t, cfg, "\t\tmodel tollgate-mock:free {\n", block+"\t\tmodel tollgate-mock:free {\n")
	}
}

// startDataPolicy starts Caddy with the data-policy models behind two
// counting upstreams and returns a client, an organization with 10 credits,
// a key of its member and a check of how many calls each upstream got.
func startDataPolicy(t *testing.T) (*client, orgFixture, string, string, func(wantRetain, wantZDR int64, when string)) {
	var retainCalls, zdrCalls atomic.Int64
	retain := startTap(t, mockAddr, func(string, []byte) { retainCalls.Add(1) }, nil)
	zdr := startTap(t, mockAddr, func(string, []byte) { zdrCalls.Add(1) }, nil)
	startInProcessWith(t, withDataPolicyModels(t, retain.Listener.Addr().String(), zdr.Listener.Addr().String()))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newOrg("10")
	key, hash := c.newKey(org.Mgmt, `{"name":"guarded","creator_user_id":"`+org.Member+`"}`)
	calls := func(wantRetain, wantZDR int64, when string) {
		t.Helper()
		if r, z := retainCalls.Load(), zdrCalls.Load(); r != wantRetain || z != wantZDR {
			t.Fatalf("%s: upstream calls retain=%d zdr=%d, want %d and %d", when, r, z, wantRetain, wantZDR)
		}
	}
	return c, org, key, hash, calls
}

// dataPolicyBody is a small chat request for model.
func dataPolicyBody(model string) string {
	return `{"model":"` + model + `","max_tokens":5,"messages":[{"role":"user","content":"hello"}]}`
}

// Guardrails' data policies through Caddy: a guardrail requiring zero data
// retention narrows a model to its ZDR provider (the other upstream gets
// no call), refuses a model with no ZDR provider with a 403 naming the
// guardrail and the policy, and hides it from /models/user; assignment and
// guardrail changes apply to the next request; policies of several
// guardrails combine (each must admit).
func TestGuardrailDataPolicies(t *testing.T) {
	c, org, key, hash, calls := startDataPolicy(t)
	models := func() []string {
		t.Helper()
		var ids []string
		for _, m := range c.api("GET", "/models/user", key, nil).expect(t, 200).JSON.Get("data").Array() {
			ids = append(ids, m.Get("id").Str)
		}
		return ids
	}

	// No guardrail: the first provider serves.
	c.mustPost("/chat/completions", key, dataPolicyBody("acme/split"), nil).expect(t, 200)
	calls(1, 0, "unguarded")
	if got := models(); !slices.Contains(got, "acme/retained") || !slices.Contains(got, "tollgate-mock") {
		t.Fatalf("/models/user %v", got)
	}

	// ZDR for models of "other" authors (acme/*, tollgate-mock).
	g := c.api("POST", "/guardrails", org.Mgmt, `{"name":"ZDR only","enforce_zdr_other":true}`).expect(t, 201).JSON.Get("data.id").Str
	c.api("POST", "/guardrails/"+g+"/assignments/keys", org.Mgmt, `{"key_hashes":["`+hash+`"]}`).expect(t, 200)
	r := c.mustPost("/chat/completions", key, dataPolicyBody("acme/split"), nil).expect(t, 200)
	calls(1, 1, "ZDR required")
	if r.JSON.Get("choices.0.message.content").Str == "" {
		t.Errorf("answer: %s", r.Body)
	}
	// Streaming takes the same route.
	c.streamOf(t, "/chat/completions", key, `{"model":"acme/split","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	calls(1, 2, "ZDR required, streaming")

	r = c.mustPost("/chat/completions", key, dataPolicyBody("acme/retained"), nil)
	r.expectError(t, 403, `Provider "retain" does not meet guardrail "ZDR only": zero data retention required`)
	if r.JSON.Get("error.metadata.guardrail_id").Str != g {
		t.Errorf("metadata: %s", r.Body)
	}
	c.mustPost("/chat/completions", key, dataPolicyBody("tollgate-mock"), nil).
		expectError(t, 403, `Provider "mock" does not meet guardrail "ZDR only": zero data retention required`)
	c.mustPost("/responses", key, `{"model":"acme/retained","input":"hi"}`, nil).expectError(t, 403, `guardrail "ZDR only"`)
	calls(1, 2, "refused requests")
	if got := models(); !slices.Equal(got, []string{"acme/split"}) {
		t.Errorf("/models/user %v, want [acme/split]", got)
	}

	// A per-author field overrides nothing for another author: enforcing
	// ZDR for OpenAI models only lifts the requirement here.
	c.api("PATCH", "/guardrails/"+g, org.Mgmt, `{"enforce_zdr_other":null,"enforce_zdr_openai":true}`).expect(t, 200)
	c.mustPost("/chat/completions", key, dataPolicyBody("acme/retained"), nil).expect(t, 200)
	calls(2, 2, "ZDR for openai only")
	// The deprecated enforce_zdr applies where the per-author field is null.
	c.api("PATCH", "/guardrails/"+g, org.Mgmt, `{"enforce_zdr":true}`).expect(t, 200)
	c.mustPost("/chat/completions", key, dataPolicyBody("acme/retained"), nil).expectError(t, 403, "zero data retention required")

	// Unassigning takes effect on the next request.
	c.api("POST", "/guardrails/"+g+"/assignments/keys/remove", org.Mgmt, `{"key_hashes":["`+hash+`"]}`).expect(t, 200)
	c.mustPost("/chat/completions", key, dataPolicyBody("acme/retained"), nil).expect(t, 200)
	calls(3, 2, "unassigned")

	// Two guardrails combine: the member's forbids paid training (the
	// "retain" provider states nothing, so it may train), the workspace's
	// default allows only the us region, which "zdr" (europe) is not in.
	noTrain := c.api("POST", "/guardrails", org.Mgmt, `{"name":"No training","enable_paid_model_training":false}`).expect(t, 201).JSON.Get("data.id").Str
	c.api("POST", "/guardrails/"+noTrain+"/assignments/members", org.Mgmt, `{"member_user_ids":["`+org.Member+`"]}`).expect(t, 200)
	c.mustPost("/chat/completions", key, dataPolicyBody("acme/split"), nil).expect(t, 200)
	calls(3, 3, "paid training forbidden")
	c.mustPost("/chat/completions", key, dataPolicyBody("acme/retained"), nil).
		expectError(t, 403, `Provider "retain" does not meet guardrail "No training": paid endpoints that train on request data are not allowed`)
	// The free model's endpoint is free: the paid-training rule does not
	// apply to it, the free-training one does.
	c.mustPost("/chat/completions", key, dataPolicyBody("tollgate-mock:free"), nil).expect(t, 200)
	c.api("PATCH", "/guardrails/"+noTrain, org.Mgmt, `{"enable_free_model_training":false}`).expect(t, 200)
	c.mustPost("/chat/completions", key, dataPolicyBody("tollgate-mock:free"), nil).
		expectError(t, 403, `guardrail "No training": free endpoints that train on request data are not allowed`)

	wsGuard := c.api("GET", "/workspaces/default", org.Mgmt, nil).expect(t, 200).JSON.Get("data.default_guardrail_id").Str
	c.api("PATCH", "/guardrails/"+wsGuard, org.Mgmt, `{"allowed_data_regions":["us"]}`).expect(t, 200)
	c.mustPost("/chat/completions", key, dataPolicyBody("acme/split"), nil).
		expectError(t, 403, "data region europe is not in allowed_data_regions (us)")
	if got := models(); len(got) != 0 {
		t.Errorf("/models/user %v, want none", got)
	}
	c.api("PATCH", "/guardrails/"+wsGuard, org.Mgmt, `{"allowed_data_regions":["europe","us"]}`).expect(t, 200)
	c.mustPost("/chat/completions", key, dataPolicyBody("acme/split"), nil).expect(t, 200)
	calls(3, 4, "europe allowed")
	if got := models(); !slices.Equal(got, []string{"acme/split"}) {
		t.Errorf("/models/user %v, want [acme/split]", got)
	}

	// Another member's key obeys only the workspace's guardrail.
	other, _ := c.newKey(org.Mgmt, `{"name":"admin's","creator_user_id":"`+org.Admin+`"}`)
	c.mustPost("/chat/completions", other, dataPolicyBody("acme/split"), nil).expect(t, 200)
	calls(3, 5, "other member")
}

// A private endpoint is the account's own deployment: it meets every data
// policy, so a key whose guardrails require ZDR and a region still reaches
// it, while the catalog's providers of the same model are refused.
func TestGuardrailDataPoliciesPrivateEndpoint(t *testing.T) {
	var ownCalls atomic.Int64
	own := startTap(t, mockAddr, func(string, []byte) { ownCalls.Add(1) }, nil)
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newOrg("10")
	key, hash := c.newKey(org.Mgmt, `{"name":"guarded","creator_user_id":"`+org.Member+`"}`)
	g := c.api("POST", "/guardrails", org.Mgmt, `{"name":"Strict","enforce_zdr":true,"allowed_data_regions":["europe"]}`).
		expect(t, 201).JSON.Get("data.id").Str
	c.api("POST", "/guardrails/"+g+"/assignments/keys", org.Mgmt, `{"key_hashes":["`+hash+`"]}`).expect(t, 200)
	body := `{"model":"tollgate-mock","max_tokens":5,"messages":[{"role":"user","content":"hello"}]}`
	c.mustPost("/chat/completions", key, body, nil).
		expectError(t, 403, `Provider "mock" does not meet guardrail "Strict": zero data retention required`)

	id := c.api("POST", peBase, org.Mgmt, `{"name":"own","model":"tollgate-mock","base_url":"http://`+own.Listener.Addr().String()+`/v1",
		"upstream_model":"tollgate-mock","api_key":"sk-own-deployment-key-0123456789"}`).expect(t, 201).JSON.Get("data.id").Str
	c.api("POST", peBase+"/"+id+"/validate", org.Mgmt, nil).expect(t, 200)
	c.api("POST", peBase+"/"+id+"/activate", org.Mgmt, nil).expect(t, 200)
	before := ownCalls.Load()
	c.mustPost("/chat/completions", key, body, nil).expect(t, 200)
	if n := ownCalls.Load() - before; n != 1 {
		t.Fatalf("the private endpoint got %d calls, want 1", n)
	}
	c.api("POST", peBase+"/"+id+"/disable", org.Mgmt, nil).expect(t, 200)
	c.mustPost("/chat/completions", key, body, nil).expectError(t, 403, `guardrail "Strict"`)
}

// A BYOK credential's declared_zdr decides ZDR requirements for the
// requests it serves: true lets a ZDR-only key use a provider the catalog
// does not state as ZDR, false keeps it off that provider, null defers to
// the catalog.
func TestGuardrailDataPoliciesBYOKDeclaredZDR(t *testing.T) {
	c, org, key, hash, calls := startDataPolicy(t)
	g := c.api("POST", "/guardrails", org.Mgmt, `{"name":"ZDR only","enforce_zdr":true}`).expect(t, 201).JSON.Get("data.id").Str
	c.api("POST", "/guardrails/"+g+"/assignments/keys", org.Mgmt, `{"key_hashes":["`+hash+`"]}`).expect(t, 200)
	listed := func(id string) bool {
		t.Helper()
		for _, m := range c.api("GET", "/models/user", key, nil).expect(t, 200).JSON.Get("data").Array() {
			if m.Get("id").Str == id {
				return true
			}
		}
		return false
	}

	cred := c.api("POST", "/byok", org.Mgmt, `{"provider":"retain","key":"sk-own-retain-key-0123456789","declared_zdr":true}`).
		expect(t, 201).JSON.Get("data.id").Str
	r := c.mustPost("/chat/completions", key, dataPolicyBody("acme/retained"), nil).expect(t, 200)
	calls(1, 0, "declared ZDR")
	if !listed("acme/retained") {
		t.Errorf("/models/user hides acme/retained though a ZDR-declared credential serves it: %s", r.Body)
	}

	c.api("PATCH", "/byok/"+cred, org.Mgmt, `{"declared_zdr":false}`).expect(t, 200)
	c.mustPost("/chat/completions", key, dataPolicyBody("acme/retained"), nil).
		expectError(t, 403, `Provider "retain" does not meet guardrail "ZDR only": zero data retention required`)
	c.mustPost("/chat/completions", key, dataPolicyBody("acme/split"), nil).expect(t, 200)
	calls(1, 1, "declared non-ZDR: the operator's ZDR provider serves")
	if listed("acme/retained") {
		t.Error("/models/user lists acme/retained with the credential declared non-ZDR")
	}

	c.api("PATCH", "/byok/"+cred, org.Mgmt, `{"declared_zdr":null}`).expect(t, 200)
	c.mustPost("/chat/completions", key, dataPolicyBody("acme/retained"), nil).expectError(t, 403, "zero data retention required")
	calls(1, 1, "null: the catalog decides")
}

// GET /key reports in allowed_data_regions the regions whose providers the
// key's effective guardrails (workspace default, member's, key's) all
// admit: every region when none restricts them, [] when their lists do not
// overlap. Routing agrees with what it reports: "zdr" runs in europe,
// "retain" states no region (global).
func TestCurrentKeyAllowedDataRegions(t *testing.T) {
	c, org, key, hash, calls := startDataPolicy(t)
	regions := func(t *testing.T, key, want string) {
		t.Helper()
		got := c.api("GET", "/key", key, nil).expect(t, 200).JSON.Get("data.allowed_data_regions")
		if !got.IsArray() || got.Raw != want {
			t.Fatalf("allowed_data_regions %s, want %s", got.Raw, want)
		}
	}
	const every = `["global","europe","us"]`
	other, _ := c.newKey(org.Mgmt, `{"name":"admin's","creator_user_id":"`+org.Admin+`"}`)

	regions(t, key, every)
	regions(t, org.Mgmt, every)

	// The key's guardrail: its list, in the API's order.
	g := c.api("POST", "/guardrails", org.Mgmt, `{"name":"Not us","allowed_data_regions":["europe","global"]}`).expect(t, 201).JSON.Get("data.id").Str
	c.api("POST", "/guardrails/"+g+"/assignments/keys", org.Mgmt, `{"key_hashes":["`+hash+`"]}`).expect(t, 200)
	regions(t, key, `["global","europe"]`)
	regions(t, other, every)

	// The member's guardrail narrows it to europe: only "zdr" serves.
	m := c.api("POST", "/guardrails", org.Mgmt, `{"name":"Not global","allowed_data_regions":["us","europe"]}`).expect(t, 201).JSON.Get("data.id").Str
	c.api("POST", "/guardrails/"+m+"/assignments/members", org.Mgmt, `{"member_user_ids":["`+org.Member+`"]}`).expect(t, 200)
	regions(t, key, `["europe"]`)
	c.mustPost("/chat/completions", key, dataPolicyBody("acme/split"), nil).expect(t, 200)
	calls(0, 1, "europe only")
	c.mustPost("/chat/completions", key, dataPolicyBody("acme/retained"), nil).
		expectError(t, 403, `guardrail "Not global": data region global is not in allowed_data_regions (us, europe)`)

	// The workspace default allows only us: nothing is left for the key,
	// and routing refuses europe too.
	ws := c.api("GET", "/workspaces/default", org.Mgmt, nil).expect(t, 200).JSON.Get("data.default_guardrail_id").Str
	c.api("PATCH", "/guardrails/"+ws, org.Mgmt, `{"allowed_data_regions":["us"]}`).expect(t, 200)
	regions(t, key, `[]`)
	regions(t, other, `["us"]`)
	c.mustPost("/chat/completions", key, dataPolicyBody("acme/split"), nil).
		expectError(t, 403, "data region europe is not in allowed_data_regions (us)")
	calls(0, 1, "no region left")

	// Changes apply to the next GET /key: unassigning the key's guardrail
	// and clearing the workspace's list leave the member's.
	c.api("POST", "/guardrails/"+g+"/assignments/keys/remove", org.Mgmt, `{"key_hashes":["`+hash+`"]}`).expect(t, 200)
	regions(t, key, `["us"]`)
	c.api("PATCH", "/guardrails/"+ws, org.Mgmt, `{"allowed_data_regions":null}`).expect(t, 200)
	regions(t, key, `["europe","us"]`)
	regions(t, other, every)
	regions(t, org.Mgmt, every)
}
