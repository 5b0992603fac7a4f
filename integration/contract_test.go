package integration

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/dialect/contract"
)

// offContract is the check of a test's own provider double: a body its
// API's contract refuses fails the test and is answered 400, as the
// provider would; it reports whether it was.
func offContract(t *testing.T, w http.ResponseWriter, r *http.Request, body []byte) bool {
	api := contract.APIOf(r.URL.Path)
	if api == "" {
		return false
	}
	if err := contract.Validate(api, body); err != nil {
		t.Errorf("the gateway sent %s a body its contract refuses: %v\n%s", r.URL.Path, err, body)
		http.Error(w, `{"error":{"message":"contract"}}`, http.StatusBadRequest)
		return true
	}
	return false
}

// TestProviderContractLimits: a request that an OpenAI-style provider's
// API would refuse as translated (a Messages request with five stop
// sequences: chat completions take four) never reaches it. With only
// such providers it is a 400 naming the client's field, charged nothing;
// with another provider whose API takes it, that provider serves it, as
// require_parameters would route; within the limit it is served, through
// the mock, which refuses whatever the provider's contract refuses. A
// Responses request passed as it is gets the same care.
func TestProviderContractLimits(t *testing.T) {
	var mu sync.Mutex
	var anthropicCalls []string
	tap := startTap(t, mockAddr, func(path string, body []byte) {
		mu.Lock()
		anthropicCalls = append(anthropicCalls, path+" "+string(body))
		mu.Unlock()
	}, nil)
	mixed := fmt.Sprintf("\t\tmodel contract-mixed {\n\t\t\tcontext_length 8192\n\t\t\tpricing {\n\t\t\t\tprompt 0.000001\n\t\t\t\tcompletion 0.000002\n\t\t\t}\n"+
		"\t\t\tprovider mock http://%s/v1 {\n\t\t\t\tmodel tollgate-mock\n\t\t\t\tapi_key mock\n\t\t\t}\n"+
		"\t\t\tprovider anthropic %s/v1 {\n\t\t\t\tmodel claude-mock\n\t\t\t\tapi_key sk-ant-operator\n\t\t\t\tstyle anthropic\n\t\t\t}\n\t\t}\n", mockAddr, tap.URL)
	startInProcessWith(t, func(cfg string) string {
		return replaceOnce(t, cfg, "\t\tmodel tollgate-mock:free {\n", mixed+"\t\tmodel tollgate-mock:free {\n")
	})
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"contract"}`)
	stops := func(n int) string {
		var s []string
		for i := range n {
			s = append(s, fmt.Sprintf(`"STOP%d"`, i))
		}
		return "[" + strings.Join(s, ",") + "]"
	}
	body := func(model string, n int) string {
		return `{"model":"` + model + `","max_tokens":50,"stop_sequences":` + stops(n) + `,"messages":[{"role":"user","content":"hello"}]}`
	}

	before := c.snapshot(key, org.MgmtKey)
	c.mustPost("/messages", key, body("tollgate-mock", 5), nil).
		expectError(t, 400, "stop_sequences: at most 4 stop sequences for this model's provider (OpenAI-style chat completions); 5 sent")
	expectCharged(t, before, c.snapshot(key, org.MgmtKey), 0, "a request no provider takes")

	// Four: translated into chat's stop, which the mock's contract takes.
	c.mustPost("/messages", key, body("tollgate-mock", 4), nil).expect(t, 200)

	// Five, to a model with an Anthropic-style provider too: served by it.
	r := c.mustPost("/messages", key, body("contract-mixed", 5), nil).expect(t, 200)
	mu.Lock()
	if len(anthropicCalls) != 1 || !strings.Contains(anthropicCalls[0], `"stop_sequences":`+stops(5)) {
		t.Fatalf("the Anthropic-style provider got %q; answer %s", anthropicCalls, r.Body)
	}
	mu.Unlock()

	// A Responses request reaches an OpenAI-style provider as it is, and
	// OpenAI's Responses API takes a max_output_tokens of at least 16.
	responses := func(model string, n int) string {
		return fmt.Sprintf(`{"model":%q,"input":"hello","max_output_tokens":%d}`, model, n)
	}
	before = c.snapshot(key, org.MgmtKey)
	c.mustPost("/responses", key, responses("tollgate-mock", 10), nil).
		expectError(t, 400, "max_output_tokens: at least 16 for this model's provider (OpenAI-style Responses); 10 sent")
	expectCharged(t, before, c.snapshot(key, org.MgmtKey), 0, "a Responses request no provider takes")
	c.mustPost("/responses", key, responses("tollgate-mock", 16), nil).expect(t, 200)
	// The Anthropic-style provider takes it translated, as max_tokens.
	r = c.mustPost("/responses", key, responses("contract-mixed", 10), nil).expect(t, 200)
	mu.Lock()
	defer mu.Unlock()
	if len(anthropicCalls) != 2 || !strings.Contains(anthropicCalls[1], `"max_tokens":10`) {
		t.Fatalf("the Anthropic-style provider got %q; answer %s", anthropicCalls, r.Body)
	}
}
