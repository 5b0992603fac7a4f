package gemini

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
)

// The public embeddings request as batchEmbedContents, and the answer
// back in the public form with the gateway's count as its usage.
func TestEmbeddings(t *testing.T) {
	d, _ := New(dialect.Options{Model: "gemini-embedding-001"})
	e := d.(dialect.Embedder)
	if got := e.EmbeddingsURI(); got != "/models/gemini-embedding-001:batchEmbedContents" {
		t.Errorf("URI %s", got)
	}
	for in, want := range map[string]string{
		`{"model":"google/e","input":"a \"b\""}`: `{"requests":[{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"a \"b\""}]}}]}`,
		`{"input":["a",{"content":[{"type":"text","text":"b"},{"type":"text","text":"c"}]}],"dimensions":3,"input_type":"search_document"}`: `{"requests":[` +
			`{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"a"}]},"taskType":"RETRIEVAL_DOCUMENT","outputDimensionality":3},` +
			`{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"bc"}]},"taskType":"RETRIEVAL_DOCUMENT","outputDimensionality":3}]}`,
	} {
		if got, err := e.FromEmbeddings([]byte(in)); err != nil || string(got) != want {
			t.Errorf("%s:\n got %s (%v)\nwant %s", in, got, err, want)
		}
	}
	for in, msg := range map[string]string{
		`{"input":[1,2,3]}`: "input[0]: token ids are not taken by Gemini providers",
		`{"input":[{"content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA"}}]}]}`: `input[0].content[0].type: "image_url" is not taken`,
		`{"input":[]}`:                                       "input: needs at least one input",
		`{"input":"a","input_type":"poetry"}`:                "input_type: expected",
		`{"input":"a","encoding_format":"hex"}`:              "encoding_format: expected float or base64",
		`{"input":5}`:                                        "input: expected a string or an array",
		`{"input":["` + strings.Repeat(`a","`, 100) + `a"]}`: "input: at most 100 inputs for Gemini providers; 101 sent",
	} {
		if _, err := e.FromEmbeddings([]byte(in)); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want %q", in, err, msg)
		}
	}

	answer := func(req string) string {
		rec := httptest.NewRecorder()
		w := e.ToEmbeddings(rec, []byte(req), "gemini-embedding-001", 7, 1<<20)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"embeddings":[{"values":[0.5, -1]},{"values":[0.25]}]}`))
		w.Finish()
		return rec.Body.String()
	}
	if got := answer(`{"input":["a","b"]}`); got != `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,-1]},{"object":"embedding","index":1,"embedding":[0.25]}],`+
		`"model":"gemini-embedding-001","usage":{"prompt_tokens":7,"total_tokens":7}}` {
		t.Errorf("answer %s", got)
	}
	if got := gjson.Get(answer(`{"input":["a","b"],"encoding_format":"base64"}`), "data.0.embedding").Str; got != "AAAAPwAAgL8=" {
		t.Errorf("base64 %s", got)
	}
}
