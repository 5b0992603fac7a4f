package mockprovider

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func cohereRerank(t *testing.T, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/v2/rerank", strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer k")
	w := httptest.NewRecorder()
	if err := new(Handler).ServeHTTP(w, r, nil); err != nil {
		t.Fatal(err)
	}
	return w
}

func TestCohereRerank(t *testing.T) {
	w := cohereRerank(t, `{"model":"rerank-v3.5","query":"capital of France","documents":["Berlin is a city","Paris is the capital of France"],"top_n":1}`)
	body := gjson.Parse(w.Body.String())
	if w.Code != 200 || body.Get("results.#").Int() != 1 || body.Get("results.0.index").Int() != 1 ||
		body.Get("results.0.relevance_score").Num != 1 || body.Get("meta.billed_units.search_units").Int() != 1 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

// The double refuses what Cohere's API refuses.
func TestCohereRerankStrict(t *testing.T) {
	for body, want := range map[string]string{
		`{"model":"m","query":"q","documents":[]}`:                             "documents must not be empty",
		`{"model":"m","query":"q","documents":["a"],"return_documents":false}`: `unknown field "return_documents"`,
		`{"model":"m","query":"","documents":["a"]}`:                           "query must not be empty",
		`{"model":"m","query":"q","documents":[{"text":"a"}]}`:                 "documents[0] must be a string",
		`{"model":"m","query":"q","documents":["a"],"top_n":0}`:                "top_n must be a positive integer",
		`{"query":"q","documents":["a"]}`:                                      "model is required",
	} {
		w := cohereRerank(t, body)
		if w.Code != 400 || !strings.Contains(gjson.Get(w.Body.String(), "message").Str, want) {
			t.Errorf("%s: %d %s", body, w.Code, w.Body)
		}
	}
}
