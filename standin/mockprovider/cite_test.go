package mockprovider

import (
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

func TestMockCitations(t *testing.T) {
	srv := mockServer(t, &Handler{})
	res := testgw.Post(t, srv, "/v1/chat/completions", `{"model":"cite","messages":[{"role":"user","content":"q"}]}`)
	msg := gjson.Get(res.Body, "choices.0.message")
	text := []rune(msg.Get("content").Str)
	anns := msg.Get("annotations").Array()
	if len(anns) != len(mockSources) {
		t.Fatalf("annotations: %s", msg.Raw)
	}
	for i, a := range anns {
		c := a.Get("url_citation")
		s := mockSources[i]
		want := "[" + s.title + "](" + s.url + ")"
		if a.Get("type").Str != "url_citation" || c.Get("url").Str != s.url || c.Get("title").Str != s.title ||
			string(text[c.Get("start_index").Int():c.Get("end_index").Int()]) != want {
			t.Errorf("annotation %d: %s over %q", i, a.Raw, string(text))
		}
	}
	// Cut by max_output_tokens (at least 16, as OpenAI's API takes) before
	// the second link: only the first is cited.
	res = testgw.Post(t, srv, "/v1/responses", `{"model":"cite","input":"q r s t u v w x y","max_output_tokens":16}`)
	if n := gjson.Get(res.Body, "output.0.content.0.annotations.#").Int(); n != 1 {
		t.Errorf("truncated answer: %s", res.Body)
	}
}
