// Package rerank is the POST /rerank route's service: it checks the
// public request, sends it to providers with a rerank API
// (dialect.Reranker: Cohere's, Jina's, Voyage's) in their form, bounds
// what it may use for the hold, and answers in the public form with the
// documents echoed and the usage the provider reported.
package rerank

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
)

// MaxDocuments is the most documents one request may rerank, as
// Cohere's API bounds them.
const MaxDocuments = 1000

// docsPerSearchUnit is how many documents one search unit covers (a
// query with up to 100 documents); chunkTokens the tokens of a document
// chunk that counts as one of them, the smallest a rerank API has used,
// so that the bound holds whatever the model.
const (
	docsPerSearchUnit = 100
	chunkTokens       = 500
)

// maxAnswer bounds the provider's answer the gateway reads.
const maxAnswer = 32 << 20

// Service is one checked rerank request.
type Service struct {
	query string
	// docs are the documents' text; raw their JSON as the client sent
	// them, echoed in the answer.
	docs []string
	raw  []string
	topN int64
	// bound is the most the request may use (Bound).
	bound billing.Usage
}

// New checks a rerank request's fields: query, documents (strings, or
// objects with a text), top_n.
func New(f *reqbody.Fields) (upstream.Service, *apierror.Error) {
	s := &Service{}
	q, ok := f.Get("query")
	switch {
	case !ok || q.Type != gjson.String:
		return nil, apierror.BadRequest("query: required string")
	case strings.TrimSpace(q.Str) == "":
		return nil, apierror.BadRequest("query: must not be empty")
	}
	s.query = strings.Clone(q.Str)
	docs, ok := f.Get("documents")
	if !ok || !docs.IsArray() {
		return nil, apierror.BadRequest("documents: required array of documents")
	}
	var apiErr *apierror.Error
	docs.ForEach(func(_, d gjson.Result) bool {
		at := "documents[" + strconv.Itoa(len(s.docs)) + "]"
		switch {
		case len(s.docs) == MaxDocuments:
			apiErr = apierror.BadRequest("documents: at most " + strconv.Itoa(MaxDocuments) + " documents")
		case d.Type == gjson.String:
			s.docs = append(s.docs, strings.Clone(d.Str))
		case d.IsObject() && d.Get("image").Exists():
			apiErr = apierror.BadRequest(at + ".image: this gateway's rerank providers take text documents only")
		case d.IsObject() && d.Get("text").Type == gjson.String:
			s.docs = append(s.docs, strings.Clone(d.Get("text").Str))
		default:
			apiErr = apierror.BadRequest(at + ": expected a string or an object with a text")
		}
		if apiErr == nil {
			s.raw = append(s.raw, d.Raw)
		}
		return apiErr == nil
	})
	if apiErr != nil {
		return nil, apiErr
	}
	if len(s.docs) == 0 {
		return nil, apierror.BadRequest("documents: must hold at least one document")
	}
	for i, raw := range s.raw {
		s.raw[i] = strings.Clone(raw)
	}
	if v, ok := f.Get("top_n"); ok && v.Type != gjson.Null {
		if v.Type != gjson.Number || v.Num < 1 || float64(v.Int()) != v.Num {
			return nil, apierror.BadRequest("top_n: a positive integer")
		}
		s.topN = min(v.Int(), int64(len(s.docs)))
	}
	if v, ok := f.Get("stream"); ok && v.Type == gjson.True {
		return nil, apierror.BadRequest("stream: rerank does not stream")
	}
	s.bound = s.computeBound()
	return s, nil
}

// computeBound bounds the request's use: every document with the query
// as tokens (billing.EstimateTokens, an upper bound), the documents,
// and the search units of the documents split into chunks of
// chunkTokens.
func (s *Service) computeBound() billing.Usage {
	q := billing.EstimateTokens(len(s.query))
	b := billing.Usage{Documents: int64(len(s.docs))}
	var chunks int64
	for _, d := range s.docs {
		t := billing.EstimateTokens(len(d))
		b.PromptTokens += q + t
		chunks += max(1, (t+q+chunkTokens-1)/chunkTokens)
	}
	b.SearchUnits = (chunks + docsPerSearchUnit - 1) / docsPerSearchUnit
	return b
}

// Name implements upstream.Service.
func (s *Service) Name() string { return "rerank" }

// Check implements upstream.Service: a provider with a rerank API
// serves every checked request.
func (s *Service) Check(a upstream.Attempt) *apierror.Error {
	if _, ok := a.Provider.D().(dialect.Reranker); !ok {
		return apierror.BadRequest("model: its providers do not serve rerank")
	}
	return nil
}

// URI implements upstream.Service.
func (s *Service) URI(d dialect.Dialect) string { return d.(dialect.Reranker).RerankURI() }

// Body implements upstream.Service.
func (s *Service) Body(d dialect.Dialect, model string) ([]byte, error) {
	return d.(dialect.Reranker).RerankBody(dialect.RerankRequest{Model: model, Query: s.query, Documents: s.docs, TopN: s.topN})
}

// Bound implements upstream.Service.
func (s *Service) Bound() billing.Usage { return s.bound }

// Answer implements upstream.Service.
func (s *Service) Answer(w http.ResponseWriter, route *upstream.Route, genID string) upstream.ServiceAnswer {
	return upstream.NewWholeAnswer(w, s, route, genID, maxAnswer)
}

// ReadAnswer implements upstream.WholeReader.
func (s *Service) ReadAnswer(route *upstream.Route, genID string, body []byte) ([]byte, billing.Usage, error) {
	ra, err := route.Dialect.(dialect.Reranker).RerankAnswer(body)
	if err != nil {
		return nil, billing.Usage{}, err
	}
	return s.public(route, genID, ra)
}

// FailureBody implements upstream.WholeReader.
func (s *Service) FailureBody(err error) []byte {
	return []byte(`{"message":` + string(jsonstr.Quote("Provider returned a rerank answer the gateway cannot read: "+err.Error())) + `}`)
}

// errIndex is a result naming no document of the request.
type errIndex int64

func (e errIndex) Error() string {
	return "result index " + strconv.FormatInt(int64(e), 10) + " names no document"
}

// public is the public answer of ra, its usage within the bound: the
// search units and tokens the provider reported (a count it did not
// report is the bound's estimate), every document once.
func (s *Service) public(route *upstream.Route, genID string, ra dialect.RerankAnswer) ([]byte, billing.Usage, error) {
	b := s.bound
	usage := billing.Usage{Documents: b.Documents, PromptTokens: b.PromptTokens,
		SearchUnits: (b.Documents + docsPerSearchUnit - 1) / docsPerSearchUnit}
	if ra.SearchUnits >= 0 {
		usage.SearchUnits = min(ra.SearchUnits, b.SearchUnits)
	}
	if ra.Tokens >= 0 {
		usage.PromptTokens = min(ra.Tokens, b.PromptTokens)
	}
	out := make([]byte, 0, 256+64*len(ra.Results))
	out = append(out, `{"id":`...)
	out = append(out, jsonstr.Quote(genID)...)
	out = append(out, `,"model":`...)
	out = append(out, jsonstr.Quote(route.Model.ID)...)
	out = append(out, `,"provider":`...)
	out = append(out, jsonstr.Quote(route.Provider.Name)...)
	out = append(out, `,"results":[`...)
	for i, r := range ra.Results {
		if r.Index >= int64(len(s.docs)) {
			return nil, billing.Usage{}, errIndex(r.Index)
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"document":`...)
		if raw := s.raw[r.Index]; raw != "" && raw[0] == '{' {
			out = append(out, raw...)
		} else {
			out = append(out, `{"text":`...)
			out = append(out, jsonstr.Quote(s.docs[r.Index])...)
			out = append(out, '}')
		}
		out = append(out, `,"index":`...)
		out = strconv.AppendInt(out, r.Index, 10)
		out = append(out, `,"relevance_score":`...)
		out = append(out, r.Score...)
		out = append(out, '}')
	}
	out = append(out, `],"usage":{`...)
	sep := ""
	if ra.SearchUnits >= 0 {
		out = append(out, `"search_units":`...)
		out = strconv.AppendInt(out, usage.SearchUnits, 10)
		sep = ","
	}
	if ra.Tokens >= 0 {
		out = append(out, sep+`"total_tokens":`...)
		out = strconv.AppendInt(out, usage.PromptTokens, 10)
	}
	return append(out, "}}"...), usage, nil
}

// Interface guards
var (
	_ upstream.Service     = (*Service)(nil)
	_ upstream.WholeReader = (*Service)(nil)
)
