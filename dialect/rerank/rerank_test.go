package rerank

import (
	"net/http"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
)

func TestRerankBodyPerAPI(t *testing.T) {
	req := dialect.RerankRequest{Model: "m", Query: `what "is"`, Documents: []string{"a", "b\n"}, TopN: 1}
	for _, tc := range []struct {
		v    variant
		want string
	}{
		{cohere, `{"model":"m","query":"what \"is\"","documents":["a","b\n"],"top_n":1}`},
		{jina, `{"model":"m","query":"what \"is\"","documents":["a","b\n"],"top_n":1,"return_documents":false}`},
		{voyage, `{"model":"m","query":"what \"is\"","documents":["a","b\n"],"top_k":1,"return_documents":false}`},
	} {
		d := &Dialect{tc.v}
		got, err := d.RerankBody(req)
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: %s, %v", tc.v.style, got, err)
		}
	}
	got, _ := (&Dialect{cohere}).RerankBody(dialect.RerankRequest{Model: "m", Query: "q", Documents: []string{"a"}})
	if string(got) != `{"model":"m","query":"q","documents":["a"]}` {
		t.Errorf("without top_n: %s", got)
	}
}

func TestRerankAnswerPerAPI(t *testing.T) {
	for _, tc := range []struct {
		v            variant
		body         string
		units, token int64
	}{
		{cohere, `{"id":"c1","results":[{"index":1,"relevance_score":0.9},{"index":0,"relevance_score":1e-3}],"meta":{"billed_units":{"search_units":1}}}`, 1, -1},
		{jina, `{"model":"m","results":[{"index":1,"relevance_score":0.9},{"index":0,"relevance_score":1e-3}],"usage":{"total_tokens":42}}`, -1, 42},
		{voyage, `{"object":"list","data":[{"index":1,"relevance_score":0.9},{"index":0,"relevance_score":1e-3}],"usage":{"total_tokens":42}}`, -1, 42},
	} {
		a, err := (&Dialect{tc.v}).RerankAnswer([]byte(tc.body))
		if err != nil || len(a.Results) != 2 || a.Results[0] != (dialect.RerankResult{Index: 1, Score: "0.9"}) ||
			a.Results[1].Score != "1e-3" || a.SearchUnits != tc.units || a.Tokens != tc.token {
			t.Errorf("%s: %+v, %v", tc.v.style, a, err)
		}
	}
	for _, bad := range []string{`{}`, `{"results":[{"index":-1,"relevance_score":1}]}`, `{"results":[{"index":0.5,"relevance_score":1}]}`, `{"results":[{"index":0}]}`} {
		if _, err := (&Dialect{cohere}).RerankAnswer([]byte(bad)); err == nil {
			t.Errorf("%s taken", bad)
		}
	}
}

func TestServesNoChatAndClearsCredentials(t *testing.T) {
	d := &Dialect{jina}
	for _, k := range []dialect.Kind{dialect.Chat, dialect.Responses, dialect.Messages, dialect.Other} {
		if d.Serves(k) || d.Native(k) {
			t.Errorf("serves %s", k)
		}
	}
	h := http.Header{"X-Api-Key": {"x"}, "Authorization": {"y"}}
	d.SetHeaders(h)
	d.SetKey(h, "k")
	if len(h) != 1 || h.Get("Authorization") != "Bearer k" {
		t.Errorf("header %v", h)
	}
	if _, msg := d.Failure(400, nil, []byte(`{"detail":[{"msg":"field required"}]}`)); msg != "field required" {
		t.Errorf("failure %q", msg)
	}
	if _, msg := (&Dialect{cohere}).Failure(400, nil, []byte(`{"message":"invalid request: query is empty"}`)); msg != "invalid request: query is empty" {
		t.Errorf("cohere failure %q", msg)
	}
}

func TestModulesRegistered(t *testing.T) {
	for _, style := range []string{"cohere", "jina", "voyage"} {
		m, err := dialect.Load([]byte(`{"style":"` + style + `"}`))
		if err != nil {
			t.Fatalf("%s: %v", style, err)
		}
		d, err := m.New(dialect.Options{})
		if err != nil || d.Name() != style {
			t.Fatalf("%s: %v %v", style, d, err)
		}
		if _, ok := d.(dialect.Reranker); !ok {
			t.Fatalf("%s is no Reranker", style)
		}
	}
}
