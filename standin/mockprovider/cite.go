package mockprovider

import (
	"strings"
	"unicode/utf8"
)

// Provider-native citations of the mock: a model whose name contains
// "cite" answers like a provider's own search model (OpenAI's
// *-search-preview): its text ends with markdown links to two fixed
// sources, and the answer carries url_citation annotations for them, in
// each API's own form:
//
//   - Chat Completions: message.annotations (streamed: one chunk whose
//     delta.annotations holds them, after the text), each
//     {"type":"url_citation","url_citation":{url,title,content,start_index,end_index}}.
//   - Responses: the output_text part's annotations (streamed:
//     response.output_text.annotation.added events after the text), each
//     {"type":"url_citation",url,title,content,start_index,end_index}.
//
// start_index and end_index count Unicode code points of the answer text;
// [start_index, end_index) is exactly the markdown link. The sources are
// non-ASCII so that a byte or UTF-16 count would differ.

// mockSource is one cited source.
type mockSource struct{ title, url, content string }

var mockSources = []mockSource{
	{"Ünïcode Café", "https://example.com/caf%C3%A9", "Café au lait, served since 1907."},
	{"文档 Docs", "https://docs.example.org/zh", "文档 for the example API."},
}

// mockCites reports whether the model answers with citations.
func mockCites(model string) bool { return strings.Contains(model, "cite") }

// mockCiteWords are the words the citing model appends to its answer.
func mockCiteWords() []string {
	var b strings.Builder
	b.WriteString("Sources:")
	for i, s := range mockSources {
		if i > 0 {
			b.WriteString(" and")
		}
		b.WriteString(" [" + s.title + "](" + s.url + ")")
	}
	return strings.Fields(b.String())
}

// mockCitation is one annotation of the answer.
type mockCitation struct {
	source     mockSource
	start, end int // code points
}

// mockCitations finds the sources' links in the answer text; a link cut
// by max_tokens is not annotated.
func mockCitations(text string) []mockCitation {
	var out []mockCitation
	for _, s := range mockSources {
		link := "[" + s.title + "](" + s.url + ")"
		i := strings.Index(text, link)
		if i < 0 {
			continue
		}
		start := utf8.RuneCountInString(text[:i])
		out = append(out, mockCitation{source: s, start: start, end: start + utf8.RuneCountInString(link)})
	}
	return out
}

// mockURLCitation is a url_citation: flat in Responses, and the inner
// object of the chat form (which has no type).
type mockURLCitation struct {
	Type       string `json:"type,omitempty"`
	URL        string `json:"url"`
	Title      string `json:"title"`
	StartIndex int    `json:"start_index"`
	EndIndex   int    `json:"end_index"`
	Content    string `json:"content"`
}

type mockChatCitation struct {
	Type        string          `json:"type"`
	URLCitation mockURLCitation `json:"url_citation"`
}

func (c mockCitation) flat() mockURLCitation {
	return mockURLCitation{URL: c.source.url, Title: c.source.title, StartIndex: c.start, EndIndex: c.end, Content: c.source.content}
}

// chat is the Chat Completions form.
func (c mockCitation) chat() any {
	return mockChatCitation{Type: "url_citation", URLCitation: c.flat()}
}

// responses is the Responses form.
func (c mockCitation) responses() any {
	f := c.flat()
	f.Type = "url_citation"
	return f
}

// chatAnnotations are the answer's annotations in the chat form; nil
// without any.
func (a *mockAnswer) chatAnnotations() []any {
	var out []any
	for _, c := range mockCitations(a.text()) {
		out = append(out, c.chat())
	}
	return out
}

// responsesAnnotations are the answer's annotations in the Responses form,
// never nil.
func (a *mockAnswer) responsesAnnotations() []any {
	out := []any{}
	for _, c := range mockCitations(a.text()) {
		out = append(out, c.responses())
	}
	return out
}
