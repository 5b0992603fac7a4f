package dialect

// Reranker is a Dialect whose provider has a rerank API (Cohere's,
// Jina's, Voyage's): the gateway's POST /rerank reaches it in that API,
// and its answer comes back in the public form.
type Reranker interface {
	// RerankURI is the rerank request's URI below the provider's base
	// path.
	RerankURI() string
	// RerankBody is the provider's rerank request.
	RerankBody(req RerankRequest) ([]byte, error)
	// RerankAnswer reads the provider's answer (a 2xx JSON body).
	RerankAnswer(body []byte) (RerankAnswer, error)
}

// RerankRequest is a rerank request as the gateway checked it.
type RerankRequest struct {
	Model     string // the provider's model id
	Query     string
	Documents []string // the documents' text, in order
	TopN      int64    // the most results to return; 0: all
}

// RerankAnswer is a provider's rerank answer.
type RerankAnswer struct {
	ID      string
	Results []RerankResult
	// SearchUnits and Tokens are the usage the provider reported; a
	// count it did not report is -1.
	SearchUnits, Tokens int64
}

// RerankResult is one ranked document.
type RerankResult struct {
	Index int64 // the document's place in the request
	// Score is the relevance score as the provider wrote it (a JSON
	// number), passed on unchanged.
	Score string
}
