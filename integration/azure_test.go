package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

// Azure OpenAI providers (style azure) through a real Caddy: the mock's
// Azure mode (deployment URLs, api-key, api-version, as strict as Azure)
// behind a proxy that records what reaches it.

// azureCall is one request an upstream received.
type azureCall struct {
	path, query string
	header      http.Header
	body        gjson.Result
}

// callTap records the requests to the mock provider.
type callTap struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls []azureCall
}

func newCallTap(t *testing.T) *callTap {
	t.Helper()
	u, _ := url.Parse("http://" + mockAddr)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	tap := &callTap{}
	tap.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		tap.mu.Lock()
		tap.calls = append(tap.calls, azureCall{path: r.URL.Path, query: r.URL.RawQuery, header: r.Header.Clone(), body: gjson.ParseBytes(b)})
		tap.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(tap.srv.Close)
	return tap
}

// take returns the calls since the last take.
func (tp *callTap) take() []azureCall {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	out := tp.calls
	tp.calls = nil
	return out
}

// withAzureModels adds azure/gpt-mock (an Azure deployment, through tap)
// and azure/fallback (a deployment that is rate limited, then an
// Anthropic-style provider).
func withAzureModels(t *testing.T, tap *callTap) func(string) string {
	pricing := "\t\t\tpricing {\n\t\t\t\tprompt 0.000003\n\t\t\t\tcompletion 0.000015\n\t\t\t}\n"
	azure := func(model string) string {
		return fmt.Sprintf("\t\t\tprovider azure %s {\n\t\t\t\tmodel %s\n\t\t\t\tapi_key az-operator-key\n\t\t\t\tstyle azure\n"+
			"\t\t\t\tdeployment gpt-prod\n\t\t\t\tapi_version 2024-10-21\n\t\t\t}\n", tap.srv.URL, model)
	}
	block := "\t\tmodel azure/gpt-mock {\n\t\t\tcontext_length 8192\n\t\t\tmax_completion_tokens 1000\n" + pricing + azure("gpt-mock") + "\t\t}\n" +
		"\t\tmodel azure/fallback {\n\t\t\tcontext_length 8192\n\t\t\tmax_completion_tokens 1000\n" + pricing + azure("gpt-error-429") +
		fmt.Sprintf("\t\t\tprovider anthropic %s {\n\t\t\t\tmodel claude-mock\n\t\t\t\tapi_key sk-ant-operator\n\t\t\t\tstyle anthropic\n\t\t\t}\n\t\t}\n", tap.srv.URL) +
		"\t\tmodel azure/broken {\n\t\t\tcontext_length 8192\n" + pricing + azure("gpt-stream-break") + "\t\t}\n"
	return func(cfg string) string {
		return replaceOnce(t, cfg, "\t\tmodel tollgate-mock:free {\n", block+"\t\tmodel tollgate-mock:free {\n")
	}
}

// expectAzureCall checks that one request reached the deployment as Azure
// wants it: its chat completions path, the API version, the api-key
// header and no bearer token.
func expectAzureCall(t *testing.T, calls []azureCall) azureCall {
	t.Helper()
	if len(calls) != 1 {
		t.Fatalf("%d upstream calls, want 1", len(calls))
	}
	c := calls[0]
	if c.path != "/openai/deployments/gpt-prod/chat/completions" || c.query != "api-version=2024-10-21" ||
		c.header.Get("Api-Key") != "az-operator-key" || c.header.Get("Authorization") != "" {
		t.Errorf("upstream call %s?%s api-key %q authorization %q", c.path, c.query, c.header.Get("Api-Key"), c.header.Get("Authorization"))
	}
	return c
}

func TestAzureProvider(t *testing.T) {
	tap := newCallTap(t)
	// The fallback's calls alone: no retry of the 429 on its endpoint.
	startInProcessWith(t, chain(withAzureModels(t, tap), withTollgateOptions(t, "retries 0")))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"azure"}`)
	const text = "Mock answer from gpt-mock: hello azure"

	t.Run("chat", func(t *testing.T) {
		tap.take()
		r := c.mustPost("/chat/completions?x=1", key, `{"model":"azure/gpt-mock","messages":[{"role":"user","content":"hello azure"}],"max_tokens":40}`, nil).expect(t, 200)
		call := expectAzureCall(t, tap.take())
		if call.body.Get("model").Str != "gpt-mock" || call.body.Get("max_tokens").Int() != 40 {
			t.Errorf("upstream body %s", call.body.Raw)
		}
		a := r.JSON
		if a.Get("choices.0.message.content").Str != text || a.Get("provider").Str != "azure" || a.Get("model").Str != "azure/gpt-mock" {
			t.Errorf("answer %s", r.Body)
		}
		expectClaudeCost(t, a.Get("usage"), 0) // the same prices as the Claude test model

		evs := c.streamOf(t, "/chat/completions", key, `{"model":"azure/gpt-mock","stream":true,"messages":[{"role":"user","content":"hello azure"}]}`)
		call = expectAzureCall(t, tap.take())
		if !call.body.Get("stream_options.include_usage").Bool() {
			t.Errorf("stream asked no usage: %s", call.body.Raw)
		}
		s := parseStream(t, evs)
		if !s.done || s.text != text {
			t.Errorf("stream text %q done %v", s.text, s.done)
		}
		expectClaudeCost(t, s.usage, 0)
	})

	t.Run("responses", func(t *testing.T) {
		tap.take()
		r := c.mustPost("/responses", key, `{"model":"azure/gpt-mock","input":"hello azure","max_output_tokens":50}`, nil).expect(t, 200)
		call := expectAzureCall(t, tap.take())
		if call.body.Get("messages.0.content").Str != "hello azure" || call.body.Get("max_tokens").Int() != 50 {
			t.Errorf("upstream body %s", call.body.Raw)
		}
		if r.JSON.Get("object").Str != "response" || r.JSON.Get("output.0.content.0.text").Str != text {
			t.Errorf("answer %s", r.Body)
		}
		expectClaudeCost(t, r.JSON.Get("usage"), 0)

		evs := c.streamOf(t, "/responses", key, `{"model":"azure/gpt-mock","input":"hello azure","stream":true}`)
		expectAzureCall(t, tap.take())
		s := parseStream(t, evs)
		if s.finalEvent != "response.completed" || s.text != text {
			t.Errorf("stream %q ended by %s", s.text, s.finalEvent)
		}
		expectClaudeCost(t, s.usage, 0)
	})

	t.Run("messages", func(t *testing.T) {
		tap.take()
		r := c.mustPost("/messages?beta=true", key, `{"model":"azure/gpt-mock","max_tokens":60,"messages":[{"role":"user","content":"hello azure"}]}`, nil).expect(t, 200)
		call := expectAzureCall(t, tap.take())
		if call.body.Get("max_tokens").Int() != 60 {
			t.Errorf("upstream body %s", call.body.Raw)
		}
		if r.JSON.Get("type").Str != "message" || r.JSON.Get("content.0.text").Str != text || r.JSON.Get("stop_reason").Str != "end_turn" {
			t.Errorf("answer %s", r.Body)
		}
		if r.JSON.Get("usage.input_tokens").Int() == 0 || r.JSON.Get("usage.output_tokens").Int() == 0 {
			t.Errorf("usage %s", r.JSON.Get("usage").Raw)
		}
		res, err := c.send("/messages", key, `{"model":"azure/gpt-mock","max_tokens":60,"stream":true,"messages":[{"role":"user","content":"hello azure"}]}`, nil)
		if err != nil {
			t.Fatal(err)
		}
		stream, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(string(stream), "event: message_stop") || !strings.Contains(string(stream), `"text":" azure"`) {
			t.Errorf("messages stream %d %s", res.StatusCode, stream)
		}
		expectAzureCall(t, tap.take())
	})

	t.Run("fallback to another dialect", func(t *testing.T) {
		tap.take()
		r := c.mustPost("/chat/completions", key, `{"model":"azure/fallback","messages":[{"role":"user","content":"hello claude"}]}`, nil).expect(t, 200)
		calls := tap.take()
		if len(calls) != 2 || !strings.HasPrefix(calls[0].path, "/openai/deployments/") || calls[1].path != "/v1/messages" ||
			calls[1].header.Get("Api-Key") != "" || calls[1].header.Get("X-Api-Key") != "sk-ant-operator" {
			t.Fatalf("upstream calls %+v", calls)
		}
		if r.JSON.Get("provider").Str != "anthropic" || r.JSON.Get("choices.0.message.content").Str != "Mock answer from claude-mock: hello claude" {
			t.Errorf("answer %s", r.Body)
		}
	})

	t.Run("mid-stream error", func(t *testing.T) {
		evs := c.streamOf(t, "/chat/completions", key, `{"model":"azure/broken","stream":true,"messages":[{"role":"user","content":"one two three four five six"}]}`)
		last := ""
		for _, ev := range evs {
			if gjson.Get(ev.Data, "error").Exists() {
				last = gjson.Get(ev.Data, "choices.0.finish_reason").Str
			}
		}
		if last != "error" || evs[len(evs)-1].Data != "[DONE]" {
			t.Errorf("stream %+v", evs)
		}
	})
}
