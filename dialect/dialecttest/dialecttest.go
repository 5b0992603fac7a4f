// Package dialecttest is the conformance suite of the dialect seam: a
// dialect module's test calls Run with its module, a provider's options
// and samples of the provider's answers, and Run checks the module and
// the dialect it builds against what package dialect promises.
package dialecttest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/dialect/contract"
)

// Answer is a provider's answer as it arrives: its content type and body.
type Answer struct {
	ContentType string
	Body        []byte
}

// Case is one dialect under test.
type Case struct {
	// Module is the dialect's module, its options set.
	Module dialect.Module
	// Options are a provider block's settings (Name, Model, API, ...).
	Options dialect.Options
	// Plain and Stream are the provider's answers to a chat request sent
	// through FromChat, whole and streamed, each with its usage: ToChat
	// must read them into chat completions. Unused when chat is native.
	Plain, Stream Answer
	// ErrorStatus and ErrorBody are an error answer of the provider, from
	// which Failure must read a message.
	ErrorStatus int
	ErrorBody   []byte
}

// requests are a plain request of each route, as the gateway's router
// hands them to a dialect (normalized: a model and an output limit).
var requests = map[dialect.Kind]string{
	dialect.Chat:      `{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"max_tokens":64,"temperature":0.5}`,
	dialect.Responses: `{"model":"m","input":"Hi","max_output_tokens":64}`,
	dialect.Messages:  `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"Hi"}]}`,
}

// uris are the client's paths of the routes.
var uris = map[dialect.Kind]string{dialect.Chat: "/chat/completions", dialect.Responses: "/responses", dialect.Messages: "/messages"}

// credentialHeaders are the headers that carry a provider credential in
// some dialect: SetHeaders must leave none of them.
var credentialHeaders = []string{"Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key"}

// Run checks c's module and dialect.
func Run(t *testing.T, c Case) {
	t.Helper()
	info := c.Module.CaddyModule()
	style := info.ID.Name()
	t.Run("module", func(t *testing.T) {
		if info.ID.Namespace() != dialect.Namespace {
			t.Fatalf("module %s is outside namespace %s", info.ID, dialect.Namespace)
		}
		if reg, err := caddy.GetModule(string(info.ID)); err != nil || reg.New == nil {
			t.Fatalf("module %s is not registered: %v", info.ID, err)
		}
		fresh := info.New()
		if _, ok := fresh.(dialect.Module); !ok {
			t.Fatalf("New gives %T, not a dialect.Module", fresh)
		}
		if v, ok := c.Module.(caddy.Validator); ok {
			if err := v.Validate(); err != nil {
				t.Fatalf("Validate refuses the case's module: %v", err)
			}
		}
		// Its config, as a provider carries it, loads the same dialect.
		raw := caddyconfig.JSONModuleObject(c.Module, "style", style, nil)
		m, err := dialect.Load(raw)
		if err != nil {
			t.Fatalf("dialect.Load(%s): %v", raw, err)
		}
		if d, err := m.New(c.Options); err != nil || d.Name() != style {
			t.Fatalf("loaded from %s: %v, %v", raw, d, err)
		}
		if _, err := dialect.Load(json.RawMessage(`{"style":"` + style + `","no_such_option":"x"}`)); err == nil ||
			!strings.Contains(err.Error(), "no_such_option: not an option of style "+style) {
			t.Fatalf("an unknown option: %v", err)
		}
	})
	d, err := c.Module.New(c.Options)
	if err != nil {
		t.Fatalf("New(%+v): %v", c.Options, err)
	}
	t.Run("name and routes", func(t *testing.T) {
		if d.Name() != style {
			t.Errorf("Name %q, module %s", d.Name(), info.ID)
		}
		for _, k := range []dialect.Kind{dialect.Chat, dialect.Responses, dialect.Messages, dialect.Other} {
			if d.Native(k) && !d.Serves(k) {
				t.Errorf("%s: native but not served", k)
			}
		}
		if !d.Serves(dialect.Chat) {
			t.Error("chat completions not served: every dialect serves them, natively or through FromChat")
		}
		rec := httptest.NewRecorder()
		if r := d.ToChat(rec, "m", 1<<20); (r == nil) != d.Native(dialect.Chat) {
			t.Errorf("ToChat %v with chat native %v: nil exactly when chat is native", r, d.Native(dialect.Chat))
		}
	})
	t.Run("requests", func(t *testing.T) {
		for k, body := range requests {
			if !d.Serves(k) {
				continue
			}
			native := d.Native(k)
			var out []byte
			var err error
			switch {
			case native:
				out, err = d.Adapt(k, []byte(body), 256)
			case k != dialect.Chat:
				continue // reaches the dialect as chat, checked as such
			case d.Native(dialect.Chat):
				out, err = d.Adapt(dialect.Chat, []byte(body), 256)
			default:
				out, err = d.FromChat([]byte(body), 256)
			}
			if err != nil {
				t.Errorf("%s (native %v): %v", k, native, err)
				continue
			}
			if !json.Valid(out) {
				t.Errorf("%s: not JSON: %s", k, out)
				continue
			}
			uri := d.URI(k, native, uris[k], false)
			if !strings.HasPrefix(uri, "/") {
				t.Errorf("%s: URI %q does not start with /", k, uri)
			}
			if api := contract.APIOf(uri); api != "" {
				if err := contract.Validate(api, out); err != nil {
					t.Errorf("%s: the body sent to %s breaks %s's contract: %v\n%s", k, uri, api, err, out)
				}
			}
			if f := d.OutputLimitField(k, native); f == "" {
				t.Errorf("%s: no output-limit field", k)
			}
		}
	})
	if !d.Native(dialect.Chat) {
		t.Run("answers", func(t *testing.T) {
			plain := readAnswer(t, d, c.Plain, 1<<20)
			a := gjson.ParseBytes(plain)
			if a.Get("object").Str != "chat.completion" || !a.Get("choices.0.message").IsObject() ||
				a.Get("usage.prompt_tokens").Int() <= 0 || a.Get("usage.completion_tokens").Int() <= 0 {
				t.Errorf("plain answer read as %s", plain)
			}
			stream := string(readAnswer(t, d, c.Stream, 7))
			if !strings.Contains(stream, `"object":"chat.completion.chunk"`) || !strings.Contains(stream, `"completion_tokens":`) ||
				!strings.HasSuffix(stream, "data: [DONE]\n\n") {
				t.Errorf("streamed answer read as %s", stream)
			}
		})
	}
	t.Run("errors", func(t *testing.T) {
		if _, msg := d.Failure(c.ErrorStatus, http.Header{"Content-Type": {"application/json"}}, c.ErrorBody); msg == "" {
			t.Errorf("Failure(%d, %s): no message", c.ErrorStatus, c.ErrorBody)
		}
		if _, msg := d.Failure(http.StatusBadGateway, nil, []byte("<html>bad gateway</html>")); strings.Contains(msg, "<html>") && len(msg) > 1000 {
			t.Errorf("a page that is not the provider's error: %q", msg)
		}
	})
	t.Run("headers", func(t *testing.T) {
		const key = "sk-conformance-key"
		h := http.Header{}
		for _, name := range credentialHeaders {
			h[name] = []string{"Bearer " + key}
		}
		if _, signs := d.(dialect.Signer); !signs {
			d.SetKey(h, key)
			if !holds(h, key) {
				t.Errorf("SetKey put the key nowhere: %v", h)
			}
		}
		d.SetHeaders(h)
		if holds(h, key) {
			t.Errorf("SetHeaders left a credential: %v", h)
		}
		for name := range h {
			if http.CanonicalHeaderKey(name) != name {
				t.Errorf("header %q is not canonical", name)
			}
		}
	})
	t.Run("allocations", func(t *testing.T) {
		n := testing.AllocsPerRun(100, func() {
			_ = d.Name()
			for _, k := range []dialect.Kind{dialect.Chat, dialect.Responses, dialect.Messages} {
				_, _ = d.Native(k), d.Serves(k)
				_ = d.OutputLimitField(k, d.Native(k))
			}
			_, _, _ = d.RequiresOutputLimit(), d.SearchFamily(), d.Parameters()
		})
		if n != 0 {
			t.Errorf("%v allocations per request for what the interface promises none", n)
		}
	})
}

// readAnswer hands a to the dialect's ToChat, chunk bytes per write, and
// returns what the client gets.
func readAnswer(t *testing.T, d dialect.Dialect, a Answer, chunk int) []byte {
	t.Helper()
	rec := httptest.NewRecorder()
	w := d.ToChat(rec, "m", 1<<20)
	w.Header().Set("Content-Type", a.ContentType)
	w.WriteHeader(http.StatusOK)
	for b := a.Body; len(b) > 0; {
		n := min(chunk, len(b))
		if _, err := w.Write(b[:n]); err != nil {
			t.Fatalf("write: %v", err)
		}
		b = b[n:]
	}
	w.Finish()
	if w.OutputProduced() <= 0 {
		t.Errorf("no output produced reported for %s", a.Body)
	}
	return rec.Body.Bytes()
}

// holds reports whether a value of h contains s.
func holds(h http.Header, s string) bool {
	for _, vs := range h {
		for _, v := range vs {
			if strings.Contains(v, s) {
				return true
			}
		}
	}
	return false
}
