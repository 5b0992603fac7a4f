package integration

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/pdftext/pdftest"
)

// hiddenFields are, per route, bodies whose "§" is one of the places the
// prompt's scan used to miss (tool and function descriptions and schemas,
// a tool's name, response formats, a Messages document's text source and
// title, reasoning sent back, a stored prompt's variables...).
var hiddenFields = []struct{ path, body string }{
	{"/chat/completions", `{"model":"ws/plain","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","description":"§"}}]}`},
	{"/chat/completions", `{"model":"ws/plain","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"q":{"type":"string","description":"§"}}}}}]}`},
	{"/chat/completions", `{"model":"ws/plain","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"§"}}]}`},
	{"/chat/completions", `{"model":"ws/plain","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"a","description":"§","schema":{"type":"object"}}}}`},
	{"/chat/completions", `{"model":"ws/plain","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"ok","reasoning":"§"},{"role":"user","content":"go"}]}`},
	{"/chat/completions", `{"model":"ws/plain","messages":[{"role":"user","content":[{"type":"text","text":"§"}]}]}`},
	{"/responses", `{"model":"ws/plain","input":"hi","tools":[{"type":"function","name":"f","description":"§","parameters":{"type":"object"}}]}`},
	{"/responses", `{"model":"ws/plain","input":"hi","text":{"format":{"type":"json_schema","name":"a","description":"§","schema":{"type":"object"}}}}`},
	{"/responses", `{"model":"ws/plain","input":[{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"§"}]},{"role":"user","content":"hi"}]}`},
	{"/responses", `{"model":"ws/plain","input":"§"}`},
	{"/messages", `{"model":"ws/plain","max_tokens":50,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"§"}}]}]}`},
	{"/messages", `{"model":"ws/plain","max_tokens":50,"messages":[{"role":"user","content":[{"type":"document","title":"§","source":{"type":"text","media_type":"text/plain","data":"notes"}}]}]}`},
	{"/messages", `{"model":"ws/plain","max_tokens":50,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","description":"§","input_schema":{"type":"object"}}]}`},
	{"/messages", `{"model":"ws/plain","max_tokens":50,"system":"§","messages":[{"role":"user","content":"hi"}]}`},
	{"/completions", `{"model":"ws/plain","prompt":"§"}`},
	{"/embeddings", `{"model":"ws/plain","input":["fine","§"]}`},
}

// disguise hides a phrase from a byte-wise match, as a reader would not
// notice.
var integrationDisguises = map[string]func(string) string{
	"zero-width joiners": func(s string) string { return strings.Join(strings.Split(s, ""), "\u200d") },
	"soft hyphens":       func(s string) string { return strings.Join(strings.Split(s, ""), "\u00ad") },
	"fullwidth": func(s string) string {
		return strings.Map(func(r rune) rune {
			if r > ' ' && r < 0x7f {
				return r + 0xFF01 - '!'
			}
			return r
		}, s)
	},
	"no-break spaces and a non-breaking hyphen": func(s string) string {
		return strings.NewReplacer(" ", "\u00a0", "-", "\u2011").Replace(s)
	},
}

// A blocked phrase (the key's project code pattern, the member's card
// builtin) hidden under a disguise in a field the scan used to miss, on
// every route, is refused with 403 through Caddy and reaches no
// provider.
func TestContentFiltersHiddenFieldsThroughCaddy(t *testing.T) {
	e := startContentFilters(t)
	phrases := map[string]string{"PROJ-1234": "project code", "4111 1111 1111 1111": "[CREDIT_CARD]"}
	for _, f := range hiddenFields {
		for dname, disguise := range integrationDisguises {
			for phrase, label := range phrases {
				if strings.Contains(f.body, `"name":"§"`) && strings.Contains(phrase, " ") {
					continue // a tool's name has no spaces
				}
				q, _ := json.Marshal("see " + disguise(phrase))
				body := strings.Replace(f.body, `"§"`, string(q), 1)
				r, seen := e.send(t, f.path, body)
				if r.Status != 403 || !strings.Contains(r.JSON.Get("error.message").Str, `content filter "`+label+`"`) || seen != "" {
					t.Errorf("%s %s, %s: %d %s; provider saw %q", f.path, body, dname, r.Status, r.Body, seen)
				}
			}
		}
	}
	// The same fields are redacted in place, the rest of the body kept.
	r, seen := e.send(t, "/messages", strings.Replace(hiddenFields[10].body, `"§"`, `"mail bob＠example．com"`, 1))
	r.expect(t, 200)
	if strings.Contains(seen, "example") || !strings.Contains(seen, "mail [EMAIL]") {
		t.Errorf("the provider saw %s", seen)
	}
}

// fetchedSite serves pages that hide what the guardrails block or
// redact: in HTML (behind a soft hyphen), in a PDF, and an address.
func fetchedSite(t *testing.T) *httptest.Server {
	t.Helper()
	pdf := pdftest.Build("Status of PROJ-1234 attached.")
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/blocked":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write([]byte("<html><head><title>Status</title></head><body><main><p>The status of PR\u00adOJ\u2011１２３４ is green.</p></main></body></html>"))
		case "/blocked.pdf":
			w.Header().Set("Content-Type", "application/pdf")
			w.Write(pdf)
		case "/contact":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write([]byte("<html><head><title>Contact</title></head><body><main><p>Write to bob\u200b@example.com today.</p></main></body></html>"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// Fetched content passes the filters as the prompt does, through Caddy:
// the web-fetch plugin's page or PDF that a filter blocks refuses the
// request (403, nothing sent or charged), one it redacts reaches the
// model redacted; the server tool tells the model a blocked page was
// withheld; a gateway-side search whose results a filter blocks is
// refused before any provider.
func TestContentFiltersFetchedThroughCaddy(t *testing.T) {
	e := startContentFilters(t)
	site := fetchedSite(t)
	plugin := `[{"id":"web-fetch"}]`
	// The chat with the plugin, to the model behind the recording proxy.
	chat := func(text string) string {
		return strings.Replace(fetchChat(text, plugin, ""), `"tollgate-mock"`, `"ws/plain"`, 1)
	}
	for _, page := range []string{"/blocked", "/blocked.pdf"} {
		before := e.usage(t)
		r, seen := e.send(t, "/chat/completions", chat("Summarize "+site.URL+page))
		r.expectError(t, 403, `content filter "project code" of guardrail "Key rules"`)
		if seen != "" {
			t.Errorf("%s: the provider saw %s", page, seen)
		}
		if after := e.usage(t); after != before {
			t.Errorf("%s: usage %s -> %s", page, before, after)
		}
	}
	r, seen := e.send(t, "/responses", `{"model":"ws/plain","plugins":[{"id":"web-fetch"}],"input":"Summarize `+site.URL+`/blocked"}`)
	r.expectError(t, 403, `content filter "project code"`)
	if seen != "" {
		t.Errorf("responses: the provider saw %s", seen)
	}
	r, seen = e.send(t, "/chat/completions", chat("Who is at "+site.URL+"/contact?"))
	r.expect(t, 200)
	if strings.Contains(seen, "bob") || !strings.Contains(seen, "Write to [EMAIL] today.") {
		t.Errorf("the provider saw %s; answer %s", seen, r.Body)
	}
	if c := r.JSON.Get("choices.0.message.annotations.0.url_citation.content").Str; strings.Contains(c, "bob") {
		t.Errorf("the citation holds the address: %s", c)
	}

	// The server tool: the blocked page is withheld from the model.
	r, seen = e.send(t, "/chat/completions", toolChat("ws/plain", "", site.URL+"/blocked"))
	r.expect(t, 200)
	if strings.Contains(seen, "green") || !strings.Contains(seen, "blocked_by_content_filter") {
		t.Errorf("server tool: the provider saw %s", seen)
	}

	// Search results: the member's guardrail now blocks a phrase the
	// engine's results hold and the query does not.
	e.c.api("PATCH", "/guardrails/"+e.memberG, e.org.Mgmt, `{"content_filters":[{"pattern":"codename-\\w+","action":"redact"},
		{"pattern":"(?i)facts\\s+-\\s+result\\s+\\d","action":"block","label":"search leak"}]}`).expect(t, 200)
	e.search.Reset()
	before := e.usage(t)
	r, seen = e.send(t, "/chat/completions", `{"model":"ws/plain","plugins":[{"id":"web"}],"messages":[{"role":"user","content":"quokka facts"}]}`)
	r.expectError(t, 403, `content filter "search leak"`)
	if n := len(e.search.Requests()); n != 1 || seen != "" {
		t.Errorf("search: %d engine requests, provider saw %q", n, seen)
	}
	if after := e.usage(t); after != before {
		t.Errorf("search: usage %s -> %s", before, after)
	}
}
