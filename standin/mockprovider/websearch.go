package mockprovider

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/handlers/websearch"
)

// mockSearch is what the mock provider sees of web search in a request:
// the results a gateway-side engine injected as a system message, or a
// provider family's native search tool, which the mock emulates.
type mockSearch struct {
	// sources are the results to cite: parsed from the injected system
	// message, or made up by a native search.
	sources []websearch.Source
	// native is the family whose native search the request asked for:
	// "openai" (web_search_options, or the Responses web_search tool),
	// "anthropic" (web_search_20250305), "x" (search_parameters, or the
	// Responses web_search / x_search tools); "" for none.
	native string
	// xSearch: the X vendor's X search was asked for.
	xSearch bool
}

// Native emulation counters, per request with X search.
const (
	mockXPosts    = 3
	mockXProfiles = 1
	mockNativeHit = 2 // results a native search "finds"
)

const injectedPrefix = "A web search was run on "

// fetchedPrefix starts the web-fetch plugin's pages (webfetch.Message),
// numbered and cited as search results are.
const fetchedPrefix = "The gateway fetched the web pages "

var sourceLine = regexp.MustCompile(`^\[(\d+)\] (.*)$`)

// parseMockSearch fills q.search from the request body.
func parseMockSearch(body []byte, q *mockRequest) {
	items := gjson.GetBytes(body, "messages")
	if !items.Exists() {
		items = gjson.GetBytes(body, "input")
	}
	for _, it := range items.Array() {
		if it.Get("role").Str != "system" {
			continue
		}
		if text := strings.TrimSpace(contentText(it.Get("content"))); strings.HasPrefix(text, injectedPrefix) || strings.HasPrefix(text, fetchedPrefix) {
			q.search.sources = parseInjected(text)
		}
	}
	switch {
	case gjson.GetBytes(body, "web_search_options").Exists():
		q.search.native = "openai"
	case gjson.GetBytes(body, "search_parameters").Exists():
		q.search.native = "x"
		q.search.xSearch = gjson.GetBytes(body, `search_parameters.sources.#(type=="x")`).Exists()
	}
	for _, t := range gjson.GetBytes(body, "tools").Array() {
		switch t.Get("type").Str {
		case "web_search_20250305":
			q.search.native = "anthropic"
		case "web_search":
			if q.search.native == "" {
				q.search.native = "openai"
			}
		case "x_search":
			q.search.native, q.search.xSearch = "x", true
		}
	}
	if q.search.native != "" && q.search.sources == nil {
		for i := 1; i <= mockNativeHit; i++ {
			n := strconv.Itoa(i)
			q.search.sources = append(q.search.sources, websearch.Source{
				Title: "Native result " + n,
				URL:   "https://" + q.search.native + ".search.example/" + n,
			})
		}
	}
}

// parseInjected reads the numbered sources back from websearch.SystemMessage.
func parseInjected(text string) []websearch.Source {
	var out []websearch.Source
	for line := range strings.SplitSeq(text, "\n") {
		if m := sourceLine.FindStringSubmatch(line); m != nil {
			out = append(out, websearch.Source{Title: m[2]})
			continue
		}
		if u, ok := strings.CutPrefix(line, "URL: "); ok && len(out) > 0 && out[len(out)-1].URL == "" {
			out[len(out)-1].URL = u
		}
	}
	return out
}

// citeWords are the words the answer adds to cite the sources: a markdown
// link [title](url) per source.
func (s *mockSearch) citeWords() []string {
	if len(s.sources) == 0 {
		return nil
	}
	words := []string{"Sources:"}
	for i, src := range s.sources {
		link := "[" + src.Title + "](" + src.URL + ")"
		if i < len(s.sources)-1 {
			link += ","
		}
		words = append(words, strings.Fields(link)...)
	}
	return words
}

// annotates reports whether the provider family annotates its own answers
// in the OpenAI form (the mock then does so too).
func (s *mockSearch) annotates(responses bool) bool {
	return s.native == "openai" || s.native == "x" && responses
}

// citations is the X vendor's top-level citations list (chat completions).
func (s *mockSearch) citations() []string {
	if s.native != "x" {
		return nil
	}
	out := []string{}
	for _, src := range s.sources {
		out = append(out, src.URL)
	}
	return out
}

type mockServerToolUse struct {
	WebSearchRequests int `json:"web_search_requests"`
	WebFetchRequests  int `json:"web_fetch_requests"`
}

type mockXUsage struct {
	PostsFetched    int `json:"posts_fetched"`
	ProfilesFetched int `json:"profiles_fetched"`
}

// usageExtras are the family's search counters.
func (s *mockSearch) usageExtras() (*mockServerToolUse, *mockXUsage, int) {
	var stu *mockServerToolUse
	var xu *mockXUsage
	n := 0
	switch s.native {
	case "anthropic":
		stu = &mockServerToolUse{WebSearchRequests: 1}
	case "x":
		n = len(s.sources)
		if s.xSearch {
			xu = &mockXUsage{PostsFetched: mockXPosts, ProfilesFetched: mockXProfiles}
		}
	}
	return stu, xu, n
}

// chatAnnotationsOf annotates text in OpenAI's chat form.
func chatAnnotationsOf(text string) []any {
	var out []any
	for _, a := range websearch.Annotate(text, nil) {
		out = append(out, map[string]any{"type": "url_citation", "url_citation": map[string]any{
			"url": a.URL, "title": a.Title, "start_index": a.StartIndex, "end_index": a.EndIndex,
		}})
	}
	return out
}

// responsesAnnotationsOf annotates text in the Responses form.
func responsesAnnotationsOf(text string) []any {
	out := []any{}
	for _, a := range websearch.Annotate(text, nil) {
		out = append(out, map[string]any{"type": "url_citation", "url": a.URL, "title": a.Title,
			"start_index": a.StartIndex, "end_index": a.EndIndex})
	}
	return out
}
