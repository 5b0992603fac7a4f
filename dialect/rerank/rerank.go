// Package rerank holds the dialects of providers that serve only a
// rerank API, one module per API: Cohere's (style cohere: POST
// /v2/rerank, billed in search units), Jina's (style jina) and Voyage's
// (style voyage), both POST /rerank and billed in tokens. Their
// providers serve no chat route: a chat model naming one is served by
// its other providers.
package rerank

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
)

func init() {
	for _, v := range variants {
		caddy.RegisterModule(Module{variant: v})
	}
}

// variant is one rerank API.
type variant struct {
	style string
	// uri is the rerank path below the provider's base path.
	uri string
	// topN names the field bounding the results; returnDocuments: the
	// API echoes the documents unless told not to (the gateway echoes
	// them itself).
	topN            string
	returnDocuments bool
	// results names the answer's array of results.
	results string
}

var (
	// Cohere's v2 API: base_url https://api.cohere.com, search units.
	cohere = variant{style: "cohere", uri: "/v2/rerank", topN: "top_n", results: "results"}
	// Jina's: base_url https://api.jina.ai/v1, tokens.
	jina = variant{style: "jina", uri: "/rerank", topN: "top_n", returnDocuments: true, results: "results"}
	// Voyage's: base_url https://api.voyageai.com/v1, tokens.
	voyage = variant{style: "voyage", uri: "/rerank", topN: "top_k", returnDocuments: true, results: "data"}

	variants = []variant{cohere, jina, voyage}
)

// Module is one rerank API's dialect as a guest module; it has no
// options.
type Module struct{ variant variant }

// CaddyModule returns the Caddy module information.
func (m Module) CaddyModule() caddy.ModuleInfo {
	v := m.variant
	return caddy.ModuleInfo{ID: caddy.ModuleID(dialect.Namespace + "." + v.style), New: func() caddy.Module { return &Module{variant: v} }}
}

// UnmarshalCaddyfile reads the style, which takes no options.
func (m *Module) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return dialect.UnmarshalOptions(d, m.variant.style, nil)
}

// New implements dialect.Module.
func (m *Module) New(dialect.Options) (dialect.Dialect, error) { return &Dialect{m.variant}, nil }

// Dialect is one rerank provider.
type Dialect struct{ v variant }

// Name implements dialect.Dialect.
func (d *Dialect) Name() string { return d.v.style }

// Native implements dialect.Dialect: no chat route.
func (d *Dialect) Native(dialect.Kind) bool { return false }

// Serves implements dialect.Dialect: no chat route.
func (d *Dialect) Serves(dialect.Kind) bool { return false }

// Adapt implements dialect.Dialect.
func (d *Dialect) Adapt(_ dialect.Kind, body []byte, _ int64) ([]byte, error) { return body, nil }

// errNoChat refuses a chat request, which routing never sends here.
var errNoChat = errors.New("this provider serves rerank only")

// FromChat implements dialect.Dialect: no chat.
func (d *Dialect) FromChat([]byte, int64) ([]byte, error) { return nil, errNoChat }

// ToChat implements dialect.Dialect: no chat.
func (d *Dialect) ToChat(http.ResponseWriter, string, int) dialect.AnswerReader { return nil }

// URI implements dialect.Dialect.
func (d *Dialect) URI(_ dialect.Kind, _ bool, uri string, _ bool) string { return uri }

// SetHeaders implements dialect.Dialect.
func (d *Dialect) SetHeaders(h http.Header) { dialect.ClearCredentials(h) }

// SetKey implements dialect.Dialect: a bearer token, as all three take.
func (d *Dialect) SetKey(h http.Header, key string) { h["Authorization"] = []string{"Bearer " + key} }

// OutputLimitField implements dialect.Dialect: no output limit.
func (d *Dialect) OutputLimitField(dialect.Kind, bool) string { return "max_tokens" }

// RequiresOutputLimit implements dialect.Dialect.
func (d *Dialect) RequiresOutputLimit() bool { return false }

// Parameters implements dialect.Dialect.
func (d *Dialect) Parameters() []string { return []string{"top_n"} }

// SearchFamily implements dialect.Dialect.
func (d *Dialect) SearchFamily() string { return "" }

// Failure implements dialect.Dialect: Cohere's {"message"}, Jina's and
// Voyage's {"detail"} (a string, or FastAPI's list of errors), else
// OpenAI's form.
func (d *Dialect) Failure(_ int, _ http.Header, body []byte) (any, string) {
	r := gjson.GetManyBytes(body, "message", "detail", "detail.0.msg")
	switch {
	case r[0].Type == gjson.String:
		return nil, r[0].Str
	case r[1].Type == gjson.String:
		return nil, r[1].Str
	case r[2].Type == gjson.String:
		return nil, r[2].Str
	}
	return dialect.ErrorBody(body)
}

// RerankURI implements dialect.Reranker.
func (d *Dialect) RerankURI() string { return d.v.uri }

// RerankBody implements dialect.Reranker.
func (d *Dialect) RerankBody(req dialect.RerankRequest) ([]byte, error) {
	b := make([]byte, 0, 64+len(req.Query)+16*len(req.Documents))
	b = append(b, `{"model":`...)
	b = append(b, jsonstr.Quote(req.Model)...)
	b = append(b, `,"query":`...)
	b = append(b, jsonstr.Quote(req.Query)...)
	b = append(b, `,"documents":[`...)
	for i, doc := range req.Documents {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, jsonstr.Quote(doc)...)
	}
	b = append(b, ']')
	if req.TopN > 0 {
		b = append(b, `,"`+d.v.topN+`":`...)
		b = strconv.AppendInt(b, req.TopN, 10)
	}
	if d.v.returnDocuments {
		b = append(b, `,"return_documents":false`...)
	}
	return append(b, '}'), nil
}

// errAnswer is an answer without its results.
var errAnswer = errors.New("rerank answer without results")

// RerankAnswer implements dialect.Reranker: Cohere's usage is
// meta.billed_units.search_units, Jina's and Voyage's usage.total_tokens.
func (d *Dialect) RerankAnswer(body []byte) (dialect.RerankAnswer, error) {
	r := gjson.GetManyBytes(body, "id", d.v.results, "meta.billed_units.search_units", "usage.total_tokens")
	a := dialect.RerankAnswer{ID: r[0].Str, SearchUnits: count(r[2]), Tokens: count(r[3])}
	if !r[1].IsArray() {
		return a, errAnswer
	}
	var bad bool
	r[1].ForEach(func(_, v gjson.Result) bool {
		i, s := v.Get("index"), v.Get("relevance_score")
		if i.Type != gjson.Number || s.Type != gjson.Number || i.Int() < 0 || float64(i.Int()) != i.Num {
			bad = true
			return false
		}
		a.Results = append(a.Results, dialect.RerankResult{Index: i.Int(), Score: s.Raw})
		return true
	})
	if bad {
		return a, errAnswer
	}
	return a, nil
}

// count is a non-negative integer count, -1 when absent or not one.
func count(v gjson.Result) int64 {
	if v.Type != gjson.Number || v.Num < 0 || float64(v.Int()) != v.Num {
		return -1
	}
	return v.Int()
}

// Interface guards
var (
	_ dialect.Module        = (*Module)(nil)
	_ caddyfile.Unmarshaler = (*Module)(nil)
	_ dialect.Dialect       = (*Dialect)(nil)
	_ dialect.Reranker      = (*Dialect)(nil)
)
