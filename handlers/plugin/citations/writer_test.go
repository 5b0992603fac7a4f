package citations

import (
	"net/http/httptest"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/websearch"
)

// pages is a Citer of fixed sources and tool use.
type pages struct {
	sources            []websearch.Source
	details, anthropic string
}

func (p *pages) Sources() []websearch.Source          { return p.sources }
func (p *pages) ToolUse() (details, anthropic string) { return p.details, p.anthropic }

// results are pages the model was told by number.
type results struct{ pages }

func (*results) NumbersSources() {}

// write sends a JSON answer through a writer of citers and returns what
// the client got.
func write(t *testing.T, kind dialect.Kind, body string, citers ...Citer) gjson.Result {
	t.Helper()
	rec := httptest.NewRecorder()
	cw := NewWriter(rec, kind, nil, citers)
	cw.Header().Set("Content-Type", "application/json")
	cw.WriteHeader(200)
	if _, err := cw.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
	cw.Finish()
	return gjson.Parse(rec.Body.String())
}

func TestNumberedSourcesFirst(t *testing.T) {
	fetched := &pages{sources: []websearch.Source{{Title: "Fetched", URL: "https://fetched.example/"}}, details: `"web_fetch_requests":1`}
	found := &results{pages{sources: []websearch.Source{{Title: "Found", URL: "https://found.example/"}}, details: `"web_search_requests":1`, anthropic: `"web_search_requests":1`}}
	// The fetch's run comes first, yet [1] is the search's first result.
	got := write(t, dialect.Chat, `{"choices":[{"message":{"content":"See [1]."}}],"usage":{"prompt_tokens":1}}`, fetched, found)
	if u := got.Get("choices.0.message.annotations.0.url_citation.url").Str; u != "https://found.example/" {
		t.Errorf("[1] cites %q, want the search's first result; %s", u, got.Raw)
	}
	if d := got.Get("usage.server_tool_use_details").Raw; d != `{"web_search_requests":1,"web_fetch_requests":1}` {
		t.Errorf("server_tool_use_details %s", d)
	}
}

func TestMessagesToolUse(t *testing.T) {
	found := &results{pages{sources: []websearch.Source{{Title: "Found", URL: "https://found.example/"}}, details: `"web_search_requests":1,"web_search_results":1`, anthropic: `"web_search_requests":1`}}
	got := write(t, dialect.Messages, `{"content":[{"type":"text","text":"See [1]."}],"usage":{"input_tokens":1}}`, found)
	if c := got.Get("content.0.citations.0.url").Str; c != "https://found.example/" {
		t.Errorf("citation %q; %s", c, got.Raw)
	}
	if u := got.Get("usage.server_tool_use").Raw; u != `{"web_search_requests":1}` {
		t.Errorf("server_tool_use %s", u)
	}
	// Nothing charged: the usage stays the provider's.
	found.details, found.anthropic = "", ""
	got = write(t, dialect.Messages, `{"content":[{"type":"text","text":"See [1]."}],"usage":{"input_tokens":1}}`, found)
	if got.Get("usage.server_tool_use").Exists() || got.Get("usage.server_tool_use_details").Exists() {
		t.Errorf("uncharged: %s", got.Raw)
	}
}
