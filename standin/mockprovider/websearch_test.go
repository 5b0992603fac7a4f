package mockprovider

import (
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/handlers/websearch"
)

func TestMockParsesInjectedSources(t *testing.T) {
	src := []websearch.Source{{Title: "Tïtle [x]", URL: "https://a.example/1", Snippet: "s"}, {Title: "Two", URL: "https://b.example/2", PublishedDate: "2026-01-01"}}
	msg := websearch.SystemMessage(src, time.Now(), "q")
	got := parseInjected(msg)
	if len(got) != 2 || got[0].Title != "Tïtle (x)" || got[0].URL != src[0].URL || got[1].URL != src[1].URL {
		t.Fatalf("parsed %+v", got)
	}
	q := &mockRequest{model: "m", lastUser: "hi"}
	q.search.sources = got
	text := newMockAnswer(q).text()
	anns := websearch.Annotate(text, got)
	if len(anns) != 2 || anns[0].URL != src[0].URL || anns[1].URL != src[1].URL {
		t.Fatalf("mock answer %q cites %+v", text, anns)
	}
}
