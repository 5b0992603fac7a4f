package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/testkit/freeport"
)

// claudeCodeVersion is the Claude Code release integration/sdk pins (its
// package.json), which TestClaudeCode runs.
const claudeCodeVersion = "2.1.331"

// claudeBinary is the native binary of Claude Code that npm installed in
// integration/sdk (the optional dependency for this platform).
func claudeBinary(t *testing.T) string {
	t.Helper()
	requireNode(t)
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	for _, pkg := range []string{runtime.GOOS + "-" + arch, runtime.GOOS + "-" + arch + "-musl"} {
		bin := filepath.Join(sdkDir, "node_modules", "@anthropic-ai", "claude-code-"+pkg, "claude")
		if _, err := os.Stat(bin); err == nil {
			abs, err := filepath.Abs(bin)
			if err != nil {
				t.Fatal(err)
			}
			// The Messages route's docs name the version tested: the one installed.
			out, err := exec.Command(abs, "--version").Output()
			if err != nil || !strings.HasPrefix(string(out), claudeCodeVersion+" ") {
				t.Fatalf("%s --version: %q, %v; want %s (npm ci in integration/sdk)", abs, out, err, claudeCodeVersion)
			}
			return abs
		}
	}
	t.Fatalf("no Claude Code binary for %s/%s in %s/node_modules/@anthropic-ai (npm ci in integration/sdk)", runtime.GOOS, runtime.GOARCH, sdkDir)
	return ""
}

// clientTap is a reverse proxy in front of the gateway that records each
// request Claude Code sends and the generation id of its answer.
type clientTap struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []tappedRequest
	gens []string
	// refused are the requests the gateway did not answer with a 200.
	refused []string
}

func newClientTap(t *testing.T, target string) *clientTap {
	t.Helper()
	u, err := url.Parse("http://" + target)
	if err != nil {
		t.Fatal(err)
	}
	tap := &clientTap{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	rp.ModifyResponse = func(res *http.Response) error {
		tap.mu.Lock()
		defer tap.mu.Unlock()
		if res.StatusCode != http.StatusOK {
			tap.refused = append(tap.refused, fmt.Sprintf("%s: %d", res.Request.URL.RequestURI(), res.StatusCode))
		}
		if id := res.Header.Get("X-Generation-Id"); id != "" {
			tap.gens = append(tap.gens, id)
		}
		return nil
	}
	tap.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		tap.mu.Lock()
		tap.reqs = append(tap.reqs, tappedRequest{uri: r.URL.RequestURI(), header: r.Header.Clone(), body: b})
		tap.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(tap.srv.Close)
	return tap
}

// take returns and forgets what the tap recorded.
func (tap *clientTap) take() (reqs []tappedRequest, gens, refused []string) {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	reqs, gens, refused = tap.reqs, tap.gens, tap.refused
	tap.reqs, tap.gens, tap.refused = nil, nil, nil
	return reqs, gens, refused
}

// runClaude runs Claude Code in print mode (claude -p prompt
// --output-format json) in dir against base, with a HOME of its own and
// its non-essential traffic off, and returns its JSON result.
func runClaude(t *testing.T, bin, base, key, model, dir, prompt string) gjson.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-p", prompt, "--output-format", "json", "--allowedTools", "Read")
	cmd.Dir = dir
	home := t.TempDir()
	// Only what the test sets: no ANTHROPIC_* of the machine's own.
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"ANTHROPIC_BASE_URL=" + base,
		"ANTHROPIC_API_KEY=" + key,
		"ANTHROPIC_MODEL=" + model,
		"ANTHROPIC_DEFAULT_HAIKU_MODEL=" + model,
		"ANTHROPIC_SMALL_FAST_MODEL=" + model,
		"CLAUDE_CODE_MAX_OUTPUT_TOKENS=4096",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_ERROR_REPORTING=1",
		"DISABLE_BUG_COMMAND=1",
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if stderr.Len() > 0 {
		t.Logf("claude stderr: %s", stderr.String())
	}
	res := gjson.ParseBytes(stdout.Bytes())
	if err != nil || !res.IsObject() {
		t.Fatalf("claude -p: %v; stdout %s", err, stdout.String())
	}
	return res
}

// TestClaudeCode runs the real Claude Code (npm @anthropic-ai/claude-code,
// its native binary) in print mode against the gateway, its model served
// by the strict OpenAI-style mock, which refuses what the chat translation
// must not forward (Anthropic's headers, cache_control, thinking, ...): a
// plain answer; a tool loop in which the mock asks for Read of a file of
// the test's directory, Claude Code runs it and the mock answers from its
// result; each model call charged exactly once.
//
// The chat models are served by a mock that, as OpenAI does for gpt-4o,
// refuses reasoning_effort for a model that does not reason: cc/mock's
// provider lists the OpenAI dialect's default parameters (no reasoning),
// so Claude Code's thinking must not reach it; cc/o3's lists reasoning
// and gets the effort. cc/claude-fold's Anthropic-style provider takes no
// system message inside messages (nor the mid-conversation-system beta):
// with system_messages fold it gets them in the top-level system.
func TestClaudeCode(t *testing.T) {
	bin := claudeBinary(t)
	quirks := freeport.Addr(t)
	chatUp, anthropicUp, foldUp := newRequestTap(t, quirks), newRequestTap(t, mockAddr), newRequestTap(t, quirks)
	withQuirkMock := func(cfg string) string {
		return cfg + fmt.Sprintf(`
http://%s {
	bind 127.0.0.1
	tollgate_mock_provider {
		strict
		non_reasoning_models tollgate-mock-4o
		no_system_messages
	}
}
`, quirks)
	}
	withCCModels := withModels(t, fmt.Sprintf(`		model cc/mock {
			context_length 200000
			max_completion_tokens 8192
			pricing {
				prompt 0.000001
				completion 0.000002
			}
			provider mock http://%[1]s/v1 {
				model tollgate-mock-4o
				api_key mock
			}
		}
		model cc/o3 {
			context_length 200000
			max_completion_tokens 8192
			pricing {
				prompt 0.000001
				completion 0.000002
			}
			provider mock http://%[1]s/v1 {
				model tollgate-mock-o3
				api_key mock
				supported_parameters max_tokens temperature top_p stop tools tool_choice parallel_tool_calls reasoning
			}
		}
		model cc/claude-fold {
			context_length 200000
			max_completion_tokens 8192
			pricing {
				prompt 0.000003
				completion 0.000015
			}
			provider anthropic http://%[3]s {
				model claude-mock
				api_key sk-ant-operator
				style anthropic
				system_messages fold
			}
		}
		model cc/claude {
			context_length 200000
			max_completion_tokens 8192
			pricing {
				prompt 0.000003
				completion 0.000015
				input_cache_read 0.0000003
				input_cache_write 0.00000375
			}
			provider anthropic http://%[2]s {
				model claude-mock
				api_key sk-ant-operator
				style anthropic
			}
		}
`, chatUp.addr(), anthropicUp.addr(), foldUp.addr()))
	startInProcessWith(t, func(cfg string) string { return withQuirkMock(withCCModels(cfg)) })
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"claude-code"}`)
	tap := newClientTap(t, gatewayAddr)
	base := tap.srv.URL + "/api"
	dir := t.TempDir()

	// check runs one print-mode session and checks what every model call
	// was: a Messages request Claude Code sent as it does today, one
	// clean chat request at the provider, one generation, charged once.
	//
	// At the chat provider, the request is a chat completion without
	// Anthropic's headers (the strict mock refuses them, and any
	// Anthropic-only member); at the Anthropic-style one, the Messages
	// request with Claude Code's betas, all of which are on the default
	// allow-list today.
	check := func(t *testing.T, model, prompt string) gjson.Result {
		provider := chatUp
		switch model {
		case "cc/claude":
			provider = anthropicUp
		case "cc/claude-fold":
			provider = foldUp
		}
		// Forget what an earlier run that failed left in the taps.
		tap.take()
		for drained := false; !drained; {
			select {
			case <-provider.last:
			default:
				drained = true
			}
		}
		before := c.snapshot(key, org.MgmtKey)
		res := runClaude(t, bin, base, key, model, dir, prompt)
		if res.Get("is_error").Bool() || res.Get("subtype").Str != "success" {
			t.Fatalf("claude result %s", res.Raw)
		}
		reqs, gens, refused := tap.take()
		if len(refused) > 0 {
			t.Fatalf("the gateway refused Claude Code's requests: %v", refused)
		}
		var calls int
		for _, r := range reqs {
			if !strings.HasPrefix(r.uri, "/api/v1/messages") {
				t.Logf("claude also sent %s", r.uri)
				continue
			}
			calls++
			logClaudeRequest(t, r)
		}
		if calls == 0 || len(gens) != calls {
			t.Fatalf("%d model calls, %d generations", calls, len(gens))
		}
		// What the run must have exercised, so that the checks below can
		// fail: thinking (every run), system messages inside messages.
		var thought, midSystem bool
		for _, r := range reqs {
			if !strings.HasPrefix(r.uri, "/api/v1/messages") {
				continue
			}
			up := provider.take(t)
			sent := strings.ReplaceAll(r.header.Get("Anthropic-Beta"), " ", "")
			// Claude Code's thinking (adaptive, with output_config.effort)
			// implies a reasoning effort, for the models that reason.
			thinks := gjson.GetBytes(r.body, "thinking").Exists() && gjson.GetBytes(r.body, "thinking.type").Str != "disabled" ||
				gjson.GetBytes(r.body, "output_config.effort").Exists()
			effort := gjson.GetBytes(up.body, "reasoning_effort")
			thought = thought || thinks
			midSystem = midSystem || gjson.GetBytes(r.body, `messages.#(role=="system")`).Exists()
			if model == "cc/claude-fold" {
				// Folded, not dropped: each text is in the system prompt.
				system := gjson.GetBytes(up.body, "system").Raw
				for _, m := range gjson.GetBytes(r.body, `messages.#(role=="system")#`).Array() {
					texts := m.Get("content.#.text").Array()
					if c := m.Get("content"); c.Type == gjson.String {
						texts = []gjson.Result{c}
					}
					for _, text := range texts {
						if !strings.Contains(system, text.Raw) {
							t.Fatalf("system message %.100s not in the provider's system %.300s", text.Raw, system)
						}
					}
				}
			}
			switch {
			case (model == "cc/mock" || model == "cc/o3") && (up.uri != "/v1/chat/completions" || up.header.Get("Anthropic-Beta") != ""):
				t.Fatalf("chat provider got %s with %v", up.uri, up.header)
			case model == "cc/mock" && effort.Exists():
				t.Fatalf("a model without reasoning got reasoning_effort %s", effort.Raw)
			case model == "cc/o3" && thinks != effort.Exists():
				t.Fatalf("a reasoning model got reasoning_effort %q for thinking %s, output_config %s", effort.Str,
					gjson.GetBytes(r.body, "thinking").Raw, gjson.GetBytes(r.body, "output_config").Raw)
			case model == "cc/claude-fold" && (up.uri != "/v1/messages?beta=true" || strings.Contains(up.header.Get("Anthropic-Beta"), "mid-conversation-system") ||
				gjson.GetBytes(up.body, `messages.#(role=="system")`).Exists()):
				t.Fatalf("folding provider got %s with anthropic-beta %q: %.300s", up.uri, up.header.Get("Anthropic-Beta"), up.body)
			case model == "cc/claude" && (up.uri != "/v1/messages?beta=true" || sent == "" || up.header.Get("Anthropic-Beta") != sent ||
				!gjson.GetBytes(up.body, "thinking").Exists() || !gjson.GetBytes(up.body, "context_management").Exists()):
				t.Fatalf("Anthropic-style provider got %s with anthropic-beta %q (Claude Code sent %q): %.300s",
					up.uri, up.header.Get("Anthropic-Beta"), sent, up.body)
			}
		}
		if !thought || model == "cc/claude-fold" && !midSystem {
			t.Fatalf("Claude Code sent no thinking (%v) or no system message inside messages (%v)", thought, midSystem)
		}
		var total money.Amount
		for _, id := range gens {
			g := c.api("GET", "/generation?id="+id, key, nil).expect(t, 200).JSON.Get("data")
			if g.Get("model").Str != model || g.Get("tokens_prompt").Int() == 0 {
				t.Fatalf("generation %s", g.Raw)
			}
			total += creditAmount(t, g.Get("total_cost"))
		}
		after := c.waitUsage(key, org.MgmtKey, before, 5*time.Second, 50*time.Millisecond)
		if after.usage-before.usage != total || total == 0 {
			t.Fatalf("charged %s for %d calls whose generations cost %s", after.usage-before.usage, calls, total)
		}
		return res
	}

	for _, tc := range []struct{ model, upstream string }{{"cc/mock", "tollgate-mock-4o"}, {"cc/o3", "tollgate-mock-o3"},
		{"cc/claude", "claude-mock"}, {"cc/claude-fold", "claude-mock"}} {
		t.Run(tc.model+" plain answer", func(t *testing.T) {
			res := check(t, tc.model, "Say hello")
			if r := res.Get("result").Str; !strings.HasPrefix(r, "Mock answer from "+tc.upstream) || res.Get("num_turns").Int() != 1 {
				t.Fatalf("result %s", res.Raw)
			}
		})

		t.Run(tc.model+" tool loop", func(t *testing.T) {
			file := filepath.Join(dir, "notes.txt")
			if err := os.WriteFile(file, []byte("The launch code is tangerine-42.\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			res := check(t, tc.model, "Quote the notes.\nmock-tool-call: Read {\"file_path\":\""+file+"\"}")
			r := res.Get("result").Str
			if !strings.HasPrefix(r, "Mock answer from "+tc.upstream+": tool result") || !strings.Contains(r, "The launch code is tangerine-42.") ||
				res.Get("num_turns").Int() != 2 {
				t.Fatalf("result %s", res.Raw)
			}
		})
	}
}

// logClaudeRequest logs what Claude Code sent (its headers' names and
// anthropic-beta, the body's top-level fields, its messages' roles and
// block types), the record of what the gateway must accept today.
func logClaudeRequest(t *testing.T, r tappedRequest) {
	t.Helper()
	body := gjson.ParseBytes(r.body)
	var fields, roles []string
	body.ForEach(func(k, _ gjson.Result) bool {
		fields = append(fields, k.Str)
		return true
	})
	for _, m := range body.Get("messages").Array() {
		role := m.Get("role").Str
		var types []string
		for _, b := range m.Get("content").Array() {
			types = append(types, b.Get("type").Str)
		}
		roles = append(roles, role+"("+strings.Join(types, ",")+")")
	}
	t.Logf("claude sent %s (%d bytes): anthropic-beta %q; fields %v; messages %v; %d tools; thinking %s; output_config %s",
		r.uri, len(r.body), r.header.Get("Anthropic-Beta"), fields, roles, len(body.Get("tools").Array()),
		body.Get("thinking").Raw, body.Get("output_config").Raw)
}

// TestMessagesAgentLoop drives an agent's loop on the Messages route
// through the strict OpenAI-style mock, as Claude Code's is: parallel
// tool calls streamed as tool_use blocks (input_json_delta, stop_reason
// tool_use), their results sent back (text, an image, an error) as tool
// messages, the answer made from them; each call charged what its usage
// says. Bad input is a 400 naming the path, charged nothing.
func TestMessagesAgentLoop(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"agent"}`)
	tools := `"tools":[{"name":"Read","description":"Read a file","input_schema":{"type":"object","properties":{"file_path":{"type":"string"}}}},
		{"name":"Grep","input_schema":{"type":"object","properties":{"pattern":{"type":"string"}}},"cache_control":{"type":"ephemeral"}}]`
	ask := `{"role":"user","content":[{"type":"text","text":"Look.\nmock-tool-call: Read {\"file_path\":\"/a.txt\"}\nmock-tool-call: Grep {\"pattern\":\"x\"}","cache_control":{"type":"ephemeral"}}]}`
	common := `"model":"tollgate-mock","max_tokens":200,"thinking":{"type":"adaptive"},"output_config":{"effort":"medium"},
		"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},` + tools

	before := c.snapshot(key, org.MgmtKey)
	docs, names := messagesEvents(t, c.streamOf(t, "/messages", key, `{`+common+`,"stream":true,"messages":[`+ask+`,{"role":"system","content":"Mid-conversation note."}]}`))
	if names != "message_start ping content_block_start content_block_delta content_block_delta content_block_stop "+
		"content_block_start content_block_delta content_block_delta content_block_stop message_delta message_stop" {
		t.Fatalf("events %s", names)
	}
	type use struct{ id, name, input string }
	var uses []use
	for _, d := range docs {
		switch d.Get("type").Str {
		case "content_block_start":
			b := d.Get("content_block")
			if b.Get("type").Str != "tool_use" || b.Get("input").Raw != "{}" {
				t.Fatalf("block %s", b.Raw)
			}
			uses = append(uses, use{id: b.Get("id").Str, name: b.Get("name").Str})
		case "content_block_delta":
			if d.Get("delta.type").Str != "input_json_delta" {
				t.Fatalf("delta %s", d.Raw)
			}
			uses[len(uses)-1].input += d.Get("delta.partial_json").Str
		}
	}
	md := docs[len(docs)-2]
	if len(uses) != 2 || uses[0].name != "Read" || uses[0].input != `{"file_path":"/a.txt"}` || uses[1].name != "Grep" ||
		uses[1].input != `{"pattern":"x"}` || md.Get("delta.stop_reason").Str != "tool_use" {
		t.Fatalf("tool uses %+v, %s", uses, md.Raw)
	}
	cost := messagesCost(t, "tool calls", md.Get("usage"))
	after := c.waitUsage(key, org.MgmtKey, before, 5*time.Second, 50*time.Millisecond)
	expectCharged(t, before, after, cost, "streamed tool calls")

	// The results: text, an image with text, an error.
	assistant := `{"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"sig-1"},` +
		`{"type":"tool_use","id":"` + uses[0].id + `","name":"Read","input":` + uses[0].input + `},` +
		`{"type":"tool_use","id":"` + uses[1].id + `","name":"Grep","input":` + uses[1].input + `}]}`
	results := `{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + uses[0].id + `","content":[{"type":"text","text":"1\tfile says hi"},` +
		`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]},` +
		`{"type":"tool_result","tool_use_id":"` + uses[1].id + `","is_error":true,"content":"no match"}]}`
	before = after
	r := c.mustPost("/messages", key, `{`+common+`,"messages":[`+ask+`,`+assistant+`,`+results+`]}`, nil).expect(t, 200)
	if got := r.JSON.Get("content.0.text").Str; got != "Mock answer from tollgate-mock: tool result 1 file says hi Error: no match" {
		t.Fatalf("answer %s", r.Body)
	}
	after = c.waitUsage(key, org.MgmtKey, before, 5*time.Second, 50*time.Millisecond)
	expectCharged(t, before, after, messagesCost(t, "answer", r.JSON.Get("usage")), "answer to the tool results")

	// Bad input: 400 naming the path, nothing charged.
	before = after
	for _, tc := range []struct{ messages, want string }{
		{`{"role":"user","content":"hi"},{"role":"assistant","content":"ok"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_x","content":"y"}]}`,
			"messages[2].content[0].tool_use_id: toolu_x answers no tool_use of the previous (assistant) message"},
		{`{"role":"user","content":[{"type":"text","text":"hi"},{"type":"hologram"}]}`,
			`messages[0].content[1].type: "hologram" is not supported by this model's provider`},
		{`{"role":"user","content":[{"type":"image","source":{"type":"base64"}}]}`,
			"messages[0].content[0].source: a base64 source needs media_type and data"},
		{`{"role":"user","content":[{"type":"text","text":7}]}`, "messages[0].content[0].text: a string"},
	} {
		r := c.mustPost("/messages", key, `{"model":"tollgate-mock","max_tokens":20,"messages":[`+tc.messages+`]}`, nil)
		expectMessagesError(t, r, 400, "invalid_request_error", tc.want)
	}
	r = c.mustPost("/messages", key, `{"model":"tollgate-mock","max_tokens":20,"container":"c","messages":[{"role":"user","content":"hi"}]}`, nil)
	expectMessagesError(t, r, 400, "invalid_request_error", "container: unknown field; only Anthropic-style providers take it")
	expectCharged(t, before, c.snapshot(key, org.MgmtKey), 0, "refused requests")
}
