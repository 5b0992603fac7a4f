package mockprovider

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

func TestScriptedAnswer(t *testing.T) {
	srv := mockServer(t, &Handler{Strict: true})
	const answer = "Here:\n```json\n{name: 'Ada',}\n```"
	msg := `"mock-answer: Here:\n` + "```json" + `\n{name: 'Ada',}\n` + "```" + `"`
	res := testgw.Post(t, srv, "/v1/chat/completions", `{"model":"m1","messages":[{"role":"user","content":`+msg+`}],"response_format":{"type":"json_object"}}`)
	j := gjson.Parse(res.Body)
	if res.Status != http.StatusOK || j.Get("choices.0.message.content").Str != answer ||
		j.Get("usage.completion_tokens").Int() != int64(len(strings.Fields(answer))) {
		t.Fatalf("%d %s", res.Status, res.Body)
	}
	// Streamed, the pieces concatenate to the answer.
	events := testgw.ParseSSE(t, testgw.Post(t, srv, "/v1/chat/completions",
		`{"model":"m1","stream":true,"messages":[{"role":"user","content":`+msg+`}]}`).Body)
	var text strings.Builder
	for _, ev := range events {
		text.WriteString(gjson.Get(ev.Data, "choices.0.delta.content").Str)
	}
	if text.String() != answer {
		t.Fatalf("streamed %q", text.String())
	}
	// Responses, cut by max_output_tokens (at least 16, as OpenAI's API
	// takes) after sixteen words, the whitespace kept.
	long := `"mock-answer: Here:\n` + "```json" + `\n{name: 'Ada', one: 1, two: 2, three: 3, four: 4, five: 5, six: 6}\n` + "```" + `"`
	res = testgw.Post(t, srv, "/v1/responses", `{"model":"m1","max_output_tokens":16,"input":`+long+`}`)
	if got := gjson.Get(res.Body, "output.0.content.0.text").Str; got != "Here:\n```json\n{name: 'Ada', one: 1, two: 2, three: 3, four: 4, five: 5, six: 6}\n" ||
		gjson.Get(res.Body, "status").Str != "incomplete" {
		t.Fatalf("%d %s", res.Status, res.Body)
	}
}

func TestVerbatimPieces(t *testing.T) {
	for _, in := range []string{"", "a", " a  b\n", "a\n\nb c ", "  "} {
		p := verbatimPieces(in)
		if strings.Join(p, "") != in || (strings.TrimSpace(in) != "" && len(p) != len(strings.Fields(in))) {
			t.Errorf("verbatimPieces(%q) = %q", in, p)
		}
	}
}
