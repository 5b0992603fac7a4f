package bedrock

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
	"github.com/tollgate-dev/caddy-tollgate/sse"
)

// Embeddings reach a Bedrock embedding model through InvokeModel, in the
// model's own body: Amazon Titan's (one input a request; the multimodal
// model takes an image too) or Cohere's (a batch of texts).

// The embedding APIs, by the model id.
const (
	embedTitan      = "titan"       // amazon.titan-embed-text-*
	embedTitanImage = "titan-image" // amazon.titan-embed-image-*: text and an image
	embedCohere     = "cohere"      // cohere.embed-*
)

// embeddingFamily is the embedding API of a Bedrock model id.
func embeddingFamily(model string) string {
	switch {
	case strings.Contains(model, "titan-embed-image"):
		return embedTitanImage
	case strings.Contains(model, "titan-embed"):
		return embedTitan
	case strings.Contains(model, "cohere.embed"):
		return embedCohere
	}
	return ""
}

// maxCohereTexts is the most texts Cohere's embed takes.
const maxCohereTexts = 96

// cohereInputTypes are the public input_type values Cohere takes.
var cohereInputTypes = []string{"search_document", "search_query", "classification", "clustering"}

// embedInput is one input: its text, and an image (base64, PNG or JPEG).
type embedInput struct {
	text, image string
	hasText     bool
}

// EmbeddingsURI implements dialect.Embedder.
func (d *Dialect) EmbeddingsURI() string { return d.embed }

// FromEmbeddings implements dialect.Embedder.
func (d *Dialect) FromEmbeddings(body []byte) ([]byte, error) {
	if d.family == "" {
		return nil, fieldError("model", "this Bedrock model is not a Titan or Cohere embedding model")
	}
	req := gjson.ParseBytes(body)
	ins, err := embedInputs(req.Get("input"), d.family == embedTitanImage)
	if err != nil {
		return nil, err
	}
	if f := req.Get("encoding_format"); f.Exists() && f.Str != "float" && f.Str != "base64" {
		return nil, fieldError("encoding_format", "expected float or base64")
	}
	dims := req.Get("dimensions")
	typ := req.Get("input_type")
	if d.family == embedCohere {
		switch {
		case len(ins) > maxCohereTexts:
			return nil, fieldError("input", "at most "+strconv.Itoa(maxCohereTexts)+" inputs for Cohere models on Bedrock; "+strconv.Itoa(len(ins))+" sent")
		case dims.Exists():
			return nil, fieldError("dimensions", "not taken by Cohere models on Bedrock")
		}
		it := "search_document"
		if typ.Exists() && typ.Type != gjson.Null {
			if it = typ.Str; !slices.Contains(cohereInputTypes, it) {
				return nil, fieldError("input_type", "expected search_document, search_query, classification or clustering for Cohere models")
			}
		}
		b := append(make([]byte, 0, len(body)+64), `{"texts":[`...)
		for i, in := range ins {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonstr.Append(b, in.text)
		}
		b = append(b, `],"input_type":`...)
		b = jsonstr.Append(b, it)
		return append(b, `,"embedding_types":["float"]}`...), nil
	}
	switch {
	case len(ins) != 1:
		return nil, fieldError("input", "Titan embedding models take one input a request; "+strconv.Itoa(len(ins))+" sent")
	case typ.Exists() && typ.Type != gjson.Null:
		return nil, fieldError("input_type", "not taken by Titan embedding models")
	}
	in := ins[0]
	b := append(make([]byte, 0, len(body)+32), '{')
	sep := false
	if in.hasText {
		b = append(b, `"inputText":`...)
		b = jsonstr.Append(b, in.text)
		sep = true
	}
	if in.image != "" {
		if sep {
			b = append(b, ',')
		}
		b = append(b, `"inputImage":`...)
		b = jsonstr.Append(b, in.image)
		sep = true
	}
	if dims.Type == gjson.Number {
		if sep {
			b = append(b, ',')
		}
		if d.family == embedTitanImage {
			b = append(b, `"embeddingConfig":{"outputEmbeddingLength":`...)
			b = strconv.AppendInt(b, dims.Int(), 10)
			b = append(b, '}')
		} else {
			b = append(b, `"dimensions":`...)
			b = strconv.AppendInt(b, dims.Int(), 10)
		}
	}
	return append(b, '}'), nil
}

// embedInputs reads the public input: strings, or multimodal inputs whose
// text parts are joined and, when images is set, one base64 PNG or JPEG
// image_url part; anything else is a 400 naming it.
func embedInputs(input gjson.Result, images bool) ([]embedInput, error) {
	if input.Type == gjson.String {
		return []embedInput{{text: input.Str, hasText: true}}, nil
	}
	if !input.IsArray() {
		return nil, fieldError("input", "expected a string or an array of inputs")
	}
	var out []embedInput
	for i, in := range input.Array() {
		at := "input[" + strconv.Itoa(i) + "]"
		switch {
		case in.Type == gjson.String:
			out = append(out, embedInput{text: in.Str, hasText: true})
		case in.Type == gjson.Number || in.IsArray():
			return nil, fieldError(at, "token ids are not taken by Bedrock providers; send text")
		case in.IsObject():
			var e embedInput
			for j, p := range in.Get("content").Array() {
				pat := at + ".content[" + strconv.Itoa(j) + "]"
				switch typ := p.Get("type").Str; {
				case typ == "text":
					e.text += p.Get("text").Str
					e.hasText = true
				case typ == "image_url" && images && e.image == "":
					u := p.Get("image_url.url").Str
					rest, ok := strings.CutPrefix(u, "data:image/")
					format, data, ok2 := strings.Cut(rest, ";base64,")
					if !ok || !ok2 || (format != "png" && format != "jpeg") || data == "" {
						return nil, fieldError(pat+".image_url.url", "Titan's multimodal model takes a base64 data: URL of a PNG or JPEG image")
					}
					e.image = data
				case typ == "image_url" && images:
					return nil, fieldError(pat, "Titan's multimodal model takes one image an input")
				default:
					return nil, fieldError(pat+".type", fmt.Sprintf("%q is not taken by this Bedrock embedding model", typ))
				}
			}
			if !e.hasText && e.image == "" {
				return nil, fieldError(at+".content", "needs a text or an image part")
			}
			out = append(out, e)
		default:
			return nil, fieldError(at, "expected a string or an input with content")
		}
	}
	if len(out) == 0 {
		return nil, fieldError("input", "needs at least one input")
	}
	return out, nil
}

// ToEmbeddings implements dialect.Embedder.
func (d *Dialect) ToEmbeddings(w http.ResponseWriter, request []byte, model string, promptTokens int64, limit int) dialect.AnswerReader {
	e := &toEmbeddings{model: model, prompt: promptTokens, base64: gjson.GetBytes(request, "encoding_format").Str == "base64"}
	e.Init(w, e)
	e.Limit = limit
	return e
}

// toEmbeddings turns a Titan or Cohere answer into the public embeddings
// answer. The usage is the input's tokens the model counted (Titan's
// inputTextTokenCount, else Bedrock's X-Amzn-Bedrock-Input-Token-Count
// header), or the gateway's count when neither says.
type toEmbeddings struct {
	sse.Writer
	model  string
	prompt int64
	base64 bool
	header int64 // the token count header, -1: none
}

// Decide implements sse.Hooks.
func (e *toEmbeddings) Decide(status int) sse.Mode {
	e.header = -1
	if n, err := strconv.ParseInt(e.Header().Get("X-Amzn-Bedrock-Input-Token-Count"), 10, 64); err == nil && n >= 0 {
		e.header = n
	}
	return e.TranslateMode(status)
}

// Event implements sse.Hooks: an embeddings answer is never a stream.
func (e *toEmbeddings) Event(ev []byte) ([]byte, error) { return ev, nil }

// Finish implements dialect.AnswerReader.
func (e *toEmbeddings) Finish() { e.FinishHeld(e.convert) }

// OutputProduced implements dialect.AnswerReader.
func (e *toEmbeddings) OutputProduced() int { return 0 }

func (e *toEmbeddings) convert(body []byte) ([]byte, bool) {
	if !jsoncheck.Valid(body) {
		return nil, false
	}
	r := gjson.ParseBytes(body)
	var vectors []gjson.Result
	switch em := r.Get("embeddings"); {
	case r.Get("embedding").IsArray(): // Titan
		vectors = []gjson.Result{r.Get("embedding")}
	case em.Get("float").IsArray(): // Cohere, embedding_types
		vectors = em.Get("float").Array()
	case em.IsArray():
		vectors = em.Array()
	default:
		return nil, false
	}
	prompt := e.prompt
	if n := r.Get("inputTextTokenCount"); n.Type == gjson.Number && n.Int() >= 0 {
		prompt = n.Int()
	} else if e.header >= 0 {
		prompt = e.header
	}
	b := append(make([]byte, 0, len(body)+128), `{"object":"list","data":[`...)
	for i, v := range vectors {
		if !v.IsArray() {
			return nil, false
		}
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = dialect.AppendEmbedding(b, i, v, e.base64); err != nil {
			return nil, false
		}
	}
	return dialect.AppendEmbeddingsEnd(b, e.model, prompt), true
}

var _ dialect.Embedder = (*Dialect)(nil)
