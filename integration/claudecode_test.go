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
func TestClaudeCode(t *testing.T) {
	bin := claudeBinary(t)
	chatUp, anthropicUp := newRequestTap(t, mockAddr), newRequestTap(t, mockAddr)
	startInProcessWith(t, withModels(t, fmt.Sprintf(`		model cc/mock {
			context_length 200000
			max_completion_tokens 8192
			pricing {
				prompt 0.000001
				completion 0.000002
			}
			provider mock http://%s/v1 {
				model tollgate-mock
				api_key mock
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
			provider anthropic http://%s {
				model claude-mock
				api_key sk-ant-operator
				style anthropic
			}
		}
`, chatUp.addr(), anthropicUp.addr())))
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
		if model == "cc/claude" {
			provider = anthropicUp
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
		for _, r := range reqs {
			if !strings.HasPrefix(r.uri, "/api/v1/messages") {
				continue
			}
			up := provider.take(t)
			sent := strings.ReplaceAll(r.header.Get("Anthropic-Beta"), " ", "")
			switch {
			case model == "cc/mock" && (up.uri != "/v1/chat/completions" || up.header.Get("Anthropic-Beta") != ""):
				t.Fatalf("chat provider got %s with %v", up.uri, up.header)
			case model == "cc/claude" && (up.uri != "/v1/messages?beta=true" || sent == "" || up.header.Get("Anthropic-Beta") != sent ||
				!gjson.GetBytes(up.body, "thinking").Exists() || !gjson.GetBytes(up.body, "context_management").Exists()):
				t.Fatalf("Anthropic-style provider got %s with anthropic-beta %q (Claude Code sent %q): %.300s",
					up.uri, up.header.Get("Anthropic-Beta"), sent, up.body)
			}
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

	for _, tc := range []struct{ model, upstream string }{{"cc/mock", "tollgate-mock"}, {"cc/claude", "claude-mock"}} {
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
