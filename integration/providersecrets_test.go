package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The keys of the provider-secrets test: the operator's for each style, and
// an account's BYOK key for the OpenAI-style provider.
const (
	echoOpenAIKey    = "sk-Qz7f3a9c1d2e4b5a60Wx8v2Lk4Jh6Gf9Ds"
	echoAnthropicKey = "sk-ant-Tp3c4d5e6f7a8b9c01Ry5u7Io9Pa"
	echoGeminiKey    = "AIzaZx9Cv8Bn7Mq6Wf5Ee4Rt3Yu2Io1Pa0Sd"
	echoAzureKey     = "az0a9b8c7d6e5f4a3bKq2Wj4Eh6Rg8Tf0Yd"
	echoBedrockKey   = "AKIAQ7W3E9R2T5Y8U1I4:Zr8Xq2Vn5Bm7/Lk9+Jh3Gf6Ds1Ap4Ow0Ie"
	echoBYOKKey      = "sk-Bb1122334455667788aaNm3Kl5Po7Iu9"
	echoEndpointKey  = "pe-Hg7Fd5Sa3Lk1Jh9Gf7Ds5Az3Xc1Vb8Nm"
)

// keyEchoProvider is a provider that answers every call with the
// credential it was sent, in the forms providers are known to echo it:
// whole, behind "Bearer ", cut short with an ellipsis; a signed request's
// Authorization header whole. A stream request gets a 200 stream whose
// only event is that error; any other request a 401 with it.
type keyEchoProvider struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls int
	seen  []string // every credential and signature echoed
}

func newKeyEchoProvider(t *testing.T) *keyEchoProvider {
	p := new(keyEchoProvider)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var cred string
		for _, h := range []string{"X-Api-Key", "Api-Key", "X-Goog-Api-Key", "Authorization"} {
			if v := r.Header.Get(h); v != "" {
				cred = strings.TrimPrefix(v, "Bearer ")
				break
			}
		}
		p.mu.Lock()
		p.calls++
		p.seen = append(p.seen, cred)
		p.mu.Unlock()
		cut := cred
		if len(cred) > 16 {
			cut = cred[:12] + "..." + cred[len(cred)-3:]
		}
		msg := fmt.Sprintf("Incorrect API key provided: Bearer %s. You can find your API key at https://example.com; yours begins %s (header %s)",
			cred, cut, r.Header.Get("Authorization"))
		m, _ := json.Marshal(msg)
		if strings.Contains(string(body), `"probe-ok"`) && strings.Contains(string(body), `"content":"ping"`) {
			// A private endpoint's validation probe, answered.
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"chatcmpl-p","object":"chat.completion","created":1,"model":"probe-ok","choices":[{"index":0,"message":{"role":"assistant","content":"pong"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
			return
		}
		stream := strings.Contains(string(body), `"stream":true`) || strings.Contains(r.URL.Path, "stream")
		if stream && !strings.Contains(r.URL.Path, "converse") {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			fmt.Fprintf(w, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"authentication_error\",\"code\":\"invalid_api_key\",\"message\":%s}}\n\n", m)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"message":%s,"error":{"message":%s,"type":"invalid_request_error","code":"invalid_api_key","status":"UNAUTHENTICATED"}}`, m, m)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// secretRuns returns the first run of 8 characters of any secret found in
// s, "" when none.
func secretRuns(s string, secrets []string) string {
	for _, sec := range secrets {
		for _, form := range []string{sec, strings.ReplaceAll(sec, "/", `\/`)} {
			for i := 0; i+8 <= len(form); i++ {
				if strings.Contains(s, form[i:i+8]) {
					return form[i : i+8]
				}
			}
		}
	}
	return ""
}

// TestProviderErrorsCarryNoSecret: a provider that echoes the credential it
// was sent, in its error body and in a stream's error event, on every route
// and every style, with the operator's keys and a BYOK key: no part of any
// of them, nor of a request's signature, reaches the client or the logs.
func TestProviderErrorsCarryNoSecret(t *testing.T) {
	echo := newKeyEchoProvider(t)
	base := echo.srv.URL
	logFile := filepath.Join(t.TempDir(), "gateway.log")
	prov := func(name, url, key, extra string) string {
		return fmt.Sprintf("\t\t\tprovider %s %s {\n\t\t\t\tmodel echo-model\n\t\t\t\tapi_key %s\n%s\t\t\t}\n", name, url, key, extra)
	}
	model := func(id, providers string) string {
		return "\t\tmodel " + id + " {\n\t\t\tcontext_length 8192\n\t\t\tmax_completion_tokens 1000\n" +
			"\t\t\tpricing {\n\t\t\t\tprompt 0.000001\n\t\t\t\tcompletion 0.000002\n\t\t\t}\n" + providers + "\t\t}\n"
	}
	models := model("echo/openai", prov("secopenai", base+"/v1", echoOpenAIKey, "")) +
		model("echo/chatonly", prov("secchat", base+"/v1", echoOpenAIKey, "\t\t\t\tapi chat\n")) +
		model("echo/anthropic", prov("secanthropic", base, echoAnthropicKey, "\t\t\t\tstyle anthropic\n")) +
		model("echo/gemini", prov("secgoogle", base+"/v1beta", echoGeminiKey, "\t\t\t\tstyle gemini\n")) +
		model("echo/azure", prov("secazure", base, echoAzureKey, "\t\t\t\tstyle azure\n\t\t\t\tdeployment echo\n\t\t\t\tapi_version 2024-10-21\n")) +
		model("echo/bedrock", prov("secbedrock", base, echoBedrockKey, "\t\t\t\tstyle bedrock\n\t\t\t\taws_region us-east-1\n"))
	startInProcessWith(t, chain(withModels(t, models), func(cfg string) string {
		return replaceOnce(t, cfg, "\tadmin ", "\tlog default {\n\t\toutput file "+logFile+"\n\t\tlevel DEBUG\n\t}\n\tadmin ")
	}))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"echo"}`)
	byok := c.newTenant("organization", "10")
	byokKey, _ := c.newKey(byok.MgmtKey, `{"name":"echo byok"}`)
	c.api("POST", "/byok", byok.MgmtKey, `{"provider":"secopenai","key":"`+echoBYOKKey+`"}`).expect(t, 201)
	secrets := []string{echoOpenAIKey, echoAnthropicKey, echoGeminiKey, echoAzureKey, echoBedrockKey, echoBYOKKey, echoEndpointKey}
	// A customer's own deployment: its validation's error, when the
	// endpoint refuses the key, carries none of it either.
	for _, upstream := range []string{"probe-refused", "probe-ok"} {
		pe := c.api("POST", "/private-endpoints", org.MgmtKey, `{"name":"`+upstream+`","model":"acme/`+upstream+`","base_url":"`+base+`/v1",
			"upstream_model":"`+upstream+`","api_key":"`+echoEndpointKey+`"}`).expect(t, 201).JSON.Get("data.id").Str
		v := c.api("POST", "/private-endpoints/"+pe+"/validate", org.MgmtKey, nil)
		if upstream == "probe-ok" {
			v.expect(t, 200)
			c.api("POST", "/private-endpoints/"+pe+"/activate", org.MgmtKey, nil).expect(t, 200)
			continue
		}
		// Answered 200 with the failed validation recorded on the endpoint.
		if v.Status != 200 || !strings.Contains(v.JSON.Get("data.last_validation.error").Str, "answered 401") {
			t.Fatalf("validating an endpoint that refuses its key: %d %s", v.Status, v.Body)
		}
		if run := secretRuns(string(v.Body), secrets); run != "" {
			t.Errorf("the validation error carries %q of the endpoint's key: %s", run, v.Body)
		}
	}

	type call struct{ path, body string }
	var calls []call
	for _, m := range []string{"echo/openai", "echo/chatonly", "echo/anthropic", "echo/gemini", "echo/azure", "echo/bedrock", "acme/probe-ok"} {
		for _, stream := range []bool{false, true} {
			calls = append(calls,
				call{"/chat/completions", fmt.Sprintf(`{"model":%q,"stream":%t,"max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`, m, stream)},
				call{"/messages", fmt.Sprintf(`{"model":%q,"stream":%t,"max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`, m, stream)},
				call{"/responses", fmt.Sprintf(`{"model":%q,"stream":%t,"max_output_tokens":20,"input":"hi"}`, m, stream)})
		}
		calls = append(calls,
			call{"/completions", fmt.Sprintf(`{"model":%q,"max_tokens":20,"prompt":"hi"}`, m)},
			call{"/embeddings", fmt.Sprintf(`{"model":%q,"input":"hi"}`, m)})
	}
	for _, k := range []string{key, byokKey} {
		for _, cl := range calls {
			if k == byokKey && !strings.Contains(cl.body, "echo/openai") {
				continue
			}
			before := echo.calls
			res, err := c.send(cl.path, k, cl.body, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(res.Body)
			res.Body.Close()
			echo.mu.Lock()
			called := echo.calls > before
			seen := append([]string(nil), echo.seen...)
			echo.mu.Unlock()
			if !called {
				continue // a route the style does not serve: answered before any provider
			}
			if res.StatusCode == 200 && !strings.Contains(res.Header.Get("Content-Type"), "event-stream") {
				t.Errorf("%s %s: status 200 for a provider error: %s", cl.path, cl.body, got)
			}
			var signatures []string
			for _, s := range seen {
				if _, sig, ok := strings.Cut(s, "Signature="); ok {
					signatures = append(signatures, sig)
				}
			}
			if run := secretRuns(string(got), append(secrets, signatures...)); run != "" {
				t.Errorf("%s %s: the answer carries %q of a secret: %s", cl.path, cl.body, run, got)
			}
		}
	}
	echo.mu.Lock()
	n, seen := echo.calls, echo.seen
	echo.mu.Unlock()
	// Every style answered, and so did the BYOK key.
	for _, want := range append(secrets, "AKIAQ7W3E9R2T5Y8U1I4/") {
		found := false
		for _, s := range seen {
			if strings.Contains(s, want) || strings.Contains(want, s) && s != "" {
				found = true
			}
		}
		if !found && !strings.HasPrefix(want, "AKIAQ7W3E9R2T5Y8U1I4:") {
			t.Errorf("no call carried %q (%d calls)", want, n)
		}
	}
	logs, err := os.ReadFile(logFile)
	if err != nil || len(logs) == 0 {
		t.Fatalf("no log: %v", err)
	}
	var signatures []string
	for _, s := range seen {
		if _, sig, ok := strings.Cut(s, "Signature="); ok {
			signatures = append(signatures, sig)
		}
	}
	if run := secretRuns(string(logs), append(secrets, signatures...)); run != "" {
		i := strings.Index(string(logs), run)
		t.Errorf("the logs carry %q of a secret: %s", run, logs[max(i-500, 0):min(i+100, len(logs))])
	}
}
