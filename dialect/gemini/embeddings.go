package gemini

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
	"github.com/tollgate-dev/caddy-tollgate/sse"
)

// Embeddings reach Gemini as batchEmbedContents: one request per input,
// each naming the model, the text as its content's one part.

// maxEmbedBatch is the most requests batchEmbedContents takes.
const maxEmbedBatch = 100

// taskTypes are Gemini's task types of the public input_type values.
var taskTypes = map[string]string{
	"search_query": "RETRIEVAL_QUERY", "search_document": "RETRIEVAL_DOCUMENT", "query": "RETRIEVAL_QUERY",
	"document": "RETRIEVAL_DOCUMENT", "classification": "CLASSIFICATION", "clustering": "CLUSTERING",
	"semantic_similarity": "SEMANTIC_SIMILARITY",
}

// EmbeddingsURI implements dialect.Embedder.
func (d *Dialect) EmbeddingsURI() string { return d.embed }

// FromEmbeddings implements dialect.Embedder: input (a string, strings,
// or the public API's multimodal inputs with text parts only: Gemini's
// embedding models read text), dimensions as outputDimensionality and
// input_type as the task type; token ids and other parts are a 400
// naming them.
func (d *Dialect) FromEmbeddings(body []byte) ([]byte, error) {
	req := gjson.ParseBytes(body)
	var texts []string
	var err error
	input := req.Get("input")
	switch {
	case input.Type == gjson.String:
		texts = []string{input.Str}
	case input.IsArray():
		for i, in := range input.Array() {
			at := "input[" + strconv.Itoa(i) + "]"
			switch {
			case in.Type == gjson.String:
				texts = append(texts, in.Str)
			case in.Type == gjson.Number || in.IsArray():
				err = fieldError(at, "token ids are not taken by Gemini providers; send text")
			case in.IsObject():
				var t string
				for j, p := range in.Get("content").Array() {
					if typ := p.Get("type").Str; typ != "text" {
						err = fieldError(at+".content["+strconv.Itoa(j)+"].type", fmt.Sprintf("%q is not taken by Gemini providers' embeddings, which read text", typ))
						break
					}
					t += p.Get("text").Str
				}
				texts = append(texts, t)
			default:
				err = fieldError(at, "expected a string or an input with content")
			}
			if err != nil {
				return nil, err
			}
		}
	default:
		return nil, fieldError("input", "expected a string or an array of inputs")
	}
	switch n := len(texts); {
	case n == 0:
		return nil, fieldError("input", "needs at least one input")
	case n > maxEmbedBatch:
		return nil, fieldError("input", "at most "+strconv.Itoa(maxEmbedBatch)+" inputs for Gemini providers; "+strconv.Itoa(n)+" sent")
	}
	task := ""
	if t := req.Get("input_type"); t.Exists() && t.Type != gjson.Null {
		if task = taskTypes[t.Str]; task == "" {
			return nil, fieldError("input_type", "expected search_query, search_document, classification, clustering or semantic_similarity for Gemini providers")
		}
	}
	dims := req.Get("dimensions")
	if f := req.Get("encoding_format"); f.Exists() && f.Str != "float" && f.Str != "base64" {
		return nil, fieldError("encoding_format", "expected float or base64")
	}
	b := append(make([]byte, 0, len(body)+64*len(texts)), `{"requests":[`...)
	for i, t := range texts {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"model":`...)
		b = jsonstr.Append(b, "models/"+d.model)
		b = append(b, `,"content":{"parts":[{"text":`...)
		b = jsonstr.Append(b, t)
		b = append(b, `}]}`...)
		if task != "" {
			b = append(b, `,"taskType":`...)
			b = jsonstr.Append(b, task)
		}
		if dims.Type == gjson.Number {
			b = append(b, `,"outputDimensionality":`...)
			b = strconv.AppendInt(b, dims.Int(), 10)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...), nil
}

// ToEmbeddings implements dialect.Embedder.
func (d *Dialect) ToEmbeddings(w http.ResponseWriter, request []byte, model string, promptTokens int64, limit int) dialect.AnswerReader {
	e := &toEmbeddings{model: model, prompt: promptTokens, base64: gjson.GetBytes(request, "encoding_format").Str == "base64"}
	e.Init(w, e)
	e.Limit = limit
	return e
}

// toEmbeddings turns a BatchEmbedContentsResponse into the public
// embeddings answer: each embedding's values, in order, as floats (or
// base64 of little-endian float32s, as OpenAI's base64 form, when the
// request asked: the meter does not read them). Gemini reports no token
// count: the usage is the gateway's count of the input.
type toEmbeddings struct {
	sse.Writer
	model  string
	prompt int64
	base64 bool
}

// Decide implements sse.Hooks.
func (e *toEmbeddings) Decide(status int) sse.Mode { return e.TranslateMode(status) }

// Event implements sse.Hooks: an embeddings answer is never a stream.
func (e *toEmbeddings) Event(ev []byte) ([]byte, error) { return ev, nil }

// Finish implements dialect.AnswerReader.
func (e *toEmbeddings) Finish() { e.FinishHeld(e.convert) }

// OutputProduced implements dialect.AnswerReader: embeddings are no
// output tokens.
func (e *toEmbeddings) OutputProduced() int { return 0 }

func (e *toEmbeddings) convert(body []byte) ([]byte, bool) {
	if !jsoncheck.Valid(body) {
		return nil, false
	}
	embs := gjson.GetBytes(body, "embeddings")
	if !embs.IsArray() {
		return nil, false
	}
	b := append(make([]byte, 0, len(body)+128), `{"object":"list","data":[`...)
	for i, em := range embs.Array() {
		if i > 0 {
			b = append(b, ',')
		}
		values := em.Get("values")
		if !values.IsArray() {
			return nil, false
		}
		var err error
		if b, err = dialect.AppendEmbedding(b, i, values, e.base64); err != nil {
			return nil, false
		}
	}
	return dialect.AppendEmbeddingsEnd(b, e.model, e.prompt), true
}

var _ dialect.Embedder = (*Dialect)(nil)
