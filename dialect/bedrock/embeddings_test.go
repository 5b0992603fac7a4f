package bedrock

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
)

func embedder(t *testing.T, model string) dialect.Embedder {
	t.Helper()
	d, err := New(dialect.Options{Model: model, Settings: map[string]string{"aws_region": "us-east-1"}})
	if err != nil {
		t.Fatal(err)
	}
	return d.(dialect.Embedder)
}

// The public embeddings request in the model's own InvokeModel body:
// Titan's one input (with an image for the multimodal model), Cohere's
// batch; what the model does not take is a 400 naming it.
func TestFromEmbeddings(t *testing.T) {
	for _, tc := range []struct{ model, in, want string }{
		{"amazon.titan-embed-text-v2:0", `{"input":"hi \"x\"","dimensions":256}`, `{"inputText":"hi \"x\"","dimensions":256}`},
		{"amazon.titan-embed-text-v2:0", `{"input":["one"]}`, `{"inputText":"one"}`},
		{"amazon.titan-embed-image-v1", `{"input":[{"content":[{"type":"text","text":"a cat"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}}]}],"dimensions":384}`,
			`{"inputText":"a cat","inputImage":"iVBO","embeddingConfig":{"outputEmbeddingLength":384}}`},
		{"amazon.titan-embed-image-v1", `{"input":[{"content":[{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,/9j/"}}]}]}`, `{"inputImage":"/9j/"}`},
		{"cohere.embed-english-v3", `{"input":["a","b"],"input_type":"search_query"}`, `{"texts":["a","b"],"input_type":"search_query","embedding_types":["float"]}`},
		{"cohere.embed-english-v3", `{"input":"a"}`, `{"texts":["a"],"input_type":"search_document","embedding_types":["float"]}`},
	} {
		if got, err := embedder(t, tc.model).FromEmbeddings([]byte(tc.in)); err != nil || string(got) != tc.want {
			t.Errorf("%s %s:\n got %s (%v)\nwant %s", tc.model, tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ model, in, msg string }{
		{"amazon.titan-embed-text-v2:0", `{"input":["a","b"]}`, "input: Titan embedding models take one input a request; 2 sent"},
		{"amazon.titan-embed-text-v2:0", `{"input":[{"content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA"}}]}]}`, `input[0].content[0].type: "image_url" is not taken`},
		{"amazon.titan-embed-image-v1", `{"input":[{"content":[{"type":"image_url","image_url":{"url":"https://x/a.png"}}]}]}`, "input[0].content[0].image_url.url: Titan's multimodal model takes a base64 data: URL"},
		{"amazon.titan-embed-text-v2:0", `{"input":"a","input_type":"search_query"}`, "input_type: not taken by Titan"},
		{"cohere.embed-english-v3", `{"input":"a","dimensions":256}`, "dimensions: not taken by Cohere models on Bedrock"},
		{"cohere.embed-english-v3", `{"input":"a","input_type":"poetry"}`, "input_type: expected"},
		{"cohere.embed-english-v3", `{"input":[[1,2]]}`, "input[0]: token ids are not taken"},
		{"anthropic.claude-x", `{"input":"a"}`, "model: this Bedrock model is not a Titan or Cohere embedding model"},
	} {
		if _, err := embedder(t, tc.model).FromEmbeddings([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s %s: %v, want %q", tc.model, tc.in, err, tc.msg)
		}
	}
}

// Titan's and Cohere's answers as the public list, with the model's own
// token count as the usage.
func TestToEmbeddings(t *testing.T) {
	answer := func(body string, header http.Header) string {
		rec := httptest.NewRecorder()
		w := embedder(t, "cohere.embed-english-v3").ToEmbeddings(rec, []byte(`{"input":"x"}`), "m", 9, 1<<20)
		for k, v := range header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(body))
		w.Finish()
		return rec.Body.String()
	}
	for _, tc := range []struct {
		body   string
		header http.Header
		want   string
	}{
		{`{"embedding":[0.5,-1],"inputTextTokenCount":3}`, nil, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,-1]}],"model":"m","usage":{"prompt_tokens":3,"total_tokens":3}}`},
		{`{"embeddings":{"float":[[1],[2]]}}`, http.Header{"X-Amzn-Bedrock-Input-Token-Count": {"4"}},
			`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[1]},{"object":"embedding","index":1,"embedding":[2]}],"model":"m","usage":{"prompt_tokens":4,"total_tokens":4}}`},
		{`{"embeddings":[[1]]}`, nil, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[1]}],"model":"m","usage":{"prompt_tokens":9,"total_tokens":9}}`},
	} {
		if got := answer(tc.body, tc.header); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.body, got, tc.want)
		}
	}
}
