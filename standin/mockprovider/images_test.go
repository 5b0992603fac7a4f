package mockprovider

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func openAIImages(t *testing.T, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/v1/images/generations", strings.NewReader(body))
	w := httptest.NewRecorder()
	if err := new(Handler).ServeHTTP(w, r, nil); err != nil {
		t.Fatal(err)
	}
	return w
}

func TestOpenAIImages(t *testing.T) {
	w := openAIImages(t, `{"model":"gpt-image-1","prompt":"a cat","n":2,"size":"1024x1536"}`)
	j := gjson.Parse(w.Body.String())
	if w.Code != 200 || j.Get("data.#").Int() != 2 || j.Get("data.0.b64_json").Str == "" || j.Get("usage.output_tokens").Int() != 544 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

// The double refuses what OpenAI's images API refuses.
func TestOpenAIImagesStrict(t *testing.T) {
	for body, param := range map[string]string{
		`{"model":"dall-e-3","prompt":"a cat","n":2}`:                           "n",
		`{"model":"dall-e-3","prompt":"a cat","size":"1536x1024"}`:              "size",
		`{"model":"gpt-image-1","prompt":"a cat","response_format":"b64_json"}`: "response_format",
		`{"model":"dall-e-2","prompt":"a cat","background":"transparent"}`:      "background",
		`{"model":"gpt-image-1","prompt":"a cat","seed":1}`:                     "seed",
		`{"model":"gpt-image-1"}`:                                               "prompt",
		`{"model":"gpt-image-1","prompt":"a cat","n":11}`:                       "n",
	} {
		w := openAIImages(t, body)
		if w.Code != 400 || gjson.Get(w.Body.String(), "error.code").Str != param {
			t.Errorf("%s: %d %s", body, w.Code, w.Body)
		}
	}
}
