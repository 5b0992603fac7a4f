package mockprovider

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/tidwall/gjson"
)

// The Cohere-style rerank API (POST /v2/rerank), always strict, as
// Cohere's own refuses what it does not define:
//
//   - model, query (a non-empty string) and documents (1 to 1000
//     strings) are required; top_n is a positive integer and
//     max_tokens_per_doc one too; any other member is a 400;
//   - each document's relevance_score is the share of the query's words
//     it holds; results come in descending order, top_n of them;
//   - meta.billed_units.search_units is one per 100 documents.
//
// The model name's faults apply: error-429, error-500, error-garbage
// (a 200 whose body is not JSON), and wrong-usage (search_units 1000).

// cohereRerankMembers are the members a v2 rerank request may have.
var cohereRerankMembers = []string{"model", "query", "documents", "top_n", "max_tokens_per_doc"}

// cohereMaxDocuments is the most documents the API takes.
const cohereMaxDocuments = 1000

func (m *Handler) serveCohereRerank(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		writeMethodNotAllowed(w, http.MethodPost)
		return nil
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		cohereError(w, http.StatusUnauthorized, "no api key supplied")
		return nil
	}
	body, apiErr := readMockBody(w, r)
	if apiErr != nil {
		cohereError(w, apiErr.Code, apiErr.Message)
		return nil
	}
	if msg := checkCohereRerank(body); msg != "" {
		cohereError(w, http.StatusBadRequest, msg)
		return nil
	}
	req := gjson.ParseBytes(body)
	model := req.Get("model").Str
	switch {
	case strings.Contains(model, "error-429"):
		w.Header().Set("Retry-After", "1")
		cohereError(w, http.StatusTooManyRequests, "You are using a Trial key, which is limited to 10 API calls / minute.")
		return nil
	case strings.Contains(model, "error-500"):
		cohereError(w, http.StatusInternalServerError, "internal server error, this has been reported to our developers")
		return nil
	case strings.Contains(model, "error-garbage"):
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"results":[{"index":`))
		return nil
	}
	query := strings.Fields(strings.ToLower(req.Get("query").Str))
	type result struct {
		Index          int     `json:"index"`
		RelevanceScore float64 `json:"relevance_score"`
	}
	docs := req.Get("documents").Array()
	results := make([]result, len(docs))
	for i, d := range docs {
		words := strings.Fields(strings.ToLower(d.Str))
		hits := 0
		for _, q := range query {
			if slices.Contains(words, q) {
				hits++
			}
		}
		results[i] = result{Index: i, RelevanceScore: float64(hits) / float64(len(query))}
	}
	sort.SliceStable(results, func(a, b int) bool { return results[a].RelevanceScore > results[b].RelevanceScore })
	if n := req.Get("top_n").Int(); n > 0 && int(n) < len(results) {
		results = results[:n]
	}
	units := (len(docs) + 99) / 100
	if strings.Contains(model, "wrong-usage") {
		units = 1000
	}
	type billed struct {
		SearchUnits int `json:"search_units"`
	}
	writeJSON(w, http.StatusOK, struct {
		ID      string   `json:"id"`
		Results []result `json:"results"`
		Meta    struct {
			APIVersion  struct{ Version string } `json:"api_version"`
			BilledUnits billed                   `json:"billed_units"`
		} `json:"meta"`
	}{ID: "mock-rerank-" + fmt.Sprint(len(docs)), Results: results, Meta: struct {
		APIVersion  struct{ Version string } `json:"api_version"`
		BilledUnits billed                   `json:"billed_units"`
	}{BilledUnits: billed{units}}})
	return nil
}

// checkCohereRerank is the 400's message of a request the API refuses;
// "" when it takes it.
func checkCohereRerank(body []byte) string {
	req := gjson.ParseBytes(body)
	msg := ""
	req.ForEach(func(k, _ gjson.Result) bool {
		if !slices.Contains(cohereRerankMembers, k.Str) {
			msg = fmt.Sprintf("invalid request: unknown field %q", k.Str)
		}
		return msg == ""
	})
	if msg != "" {
		return msg
	}
	if m := req.Get("model"); m.Type != gjson.String || m.Str == "" {
		return "invalid request: model is required"
	}
	if q := req.Get("query"); q.Type != gjson.String || strings.TrimSpace(q.Str) == "" {
		return "invalid request: query must not be empty"
	}
	docs := req.Get("documents")
	if !docs.IsArray() || len(docs.Array()) == 0 {
		return "invalid request: list of documents must not be empty"
	}
	if n := len(docs.Array()); n > cohereMaxDocuments {
		return fmt.Sprintf("invalid request: too many documents, got %d, max is %d", n, cohereMaxDocuments)
	}
	for i, d := range docs.Array() {
		if d.Type != gjson.String {
			return fmt.Sprintf("invalid request: documents[%d] must be a string", i)
		}
	}
	for _, name := range []string{"top_n", "max_tokens_per_doc"} {
		if v := req.Get(name); v.Exists() && (v.Type != gjson.Number || v.Num < 1 || v.Num != float64(v.Int())) {
			return fmt.Sprintf("invalid request: %s must be a positive integer", name)
		}
	}
	return ""
}

// cohereError is Cohere's error body.
func cohereError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, struct {
		ID      string `json:"id"`
		Message string `json:"message"`
	}{"mock-error", msg})
}
