package openai

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
)

// imageModel is what one of OpenAI's image models offers.
type imageModel struct {
	prefix string
	maxN   int64
	sizes  []string
	// quality: the values it takes ("" : none is sent); b64 says it
	// answers URLs unless asked for base64 (response_format).
	quality []string
	b64     bool
	// gptImage: it takes background, output_format and
	// output_compression.
	gptImage bool
}

// imageModels are OpenAI's image models by id prefix, as its API
// bounds them; a model none matches is taken as gpt-image-1 is.
var imageModels = []imageModel{
	{prefix: "dall-e-3", maxN: 1, sizes: []string{"1024x1024", "1792x1024", "1024x1792"}, quality: []string{"standard", "hd"}, b64: true},
	{prefix: "dall-e-2", maxN: 10, sizes: []string{"256x256", "512x512", "1024x1024"}, b64: true},
	{prefix: "", maxN: 10, sizes: []string{"1024x1024", "1536x1024", "1024x1536", "auto"},
		quality: []string{"auto", "low", "medium", "high"}, gptImage: true},
}

// ImageModelFor is what OpenAI's image model model offers.
func imageModelFor(model string) imageModel {
	for _, m := range imageModels {
		if strings.HasPrefix(model, m.prefix) {
			return m
		}
	}
	return imageModels[len(imageModels)-1]
}

// ImagesURI implements dialect.ImageGenerator.
func (d *Dialect) ImagesURI() string { return "/images/generations" }

// ImagesBody implements dialect.ImageGenerator: the public quality high
// is dall-e-3's hd (low and medium its standard).
func (d *Dialect) ImagesBody(req dialect.ImageRequest) ([]byte, error) {
	m := imageModelFor(req.Model)
	if req.N > m.maxN {
		return nil, &dialect.FieldError{Field: "n", Message: "at most " + strconv.FormatInt(m.maxN, 10) + " for model " + req.Model}
	}
	if req.Size != "" && !slices.Contains(m.sizes, req.Size) {
		return nil, &dialect.FieldError{Field: "size", Message: "model " + req.Model + " offers " + strings.Join(m.sizes, ", ")}
	}
	b := make([]byte, 0, 96+len(req.Prompt))
	b = append(b, `{"model":`...)
	b = append(b, jsonstr.Quote(req.Model)...)
	b = append(b, `,"prompt":`...)
	b = append(b, jsonstr.Quote(req.Prompt)...)
	b = append(b, `,"n":`...)
	b = strconv.AppendInt(b, req.N, 10)
	str := func(name, v string) {
		if v != "" {
			b = append(b, `,"`+name+`":`...)
			b = append(b, jsonstr.Quote(v)...)
		}
	}
	str("size", req.Size)
	if q := req.Quality; q != "" && len(m.quality) > 0 {
		if !m.gptImage {
			q = map[string]string{"high": "hd"}[q]
			if q == "" {
				q = "standard"
			}
		}
		str("quality", q)
	}
	if m.b64 {
		str("response_format", "b64_json")
	}
	if m.gptImage {
		str("background", req.Background)
		str("output_format", req.OutputFormat)
		if req.OutputCompression >= 0 {
			b = append(b, `,"output_compression":`...)
			b = strconv.AppendInt(b, req.OutputCompression, 10)
		}
	}
	return append(b, '}'), nil
}

// errImages is an answer without its images.
var errImages = errors.New("image answer without data")

// ImagesAnswer implements dialect.ImageGenerator: usage is gpt-image-1's
// input_tokens and output_tokens; the media type is output_format's.
func (d *Dialect) ImagesAnswer(body []byte) (dialect.ImagesAnswer, error) {
	r := gjson.GetManyBytes(body, "created", "data", "usage.input_tokens", "usage.output_tokens", "output_format")
	a := dialect.ImagesAnswer{Created: r[0].Int(), PromptTokens: -1, CompletionTokens: -1}
	if r[2].Type == gjson.Number && r[2].Num >= 0 {
		a.PromptTokens = r[2].Int()
	}
	if r[3].Type == gjson.Number && r[3].Num >= 0 {
		a.CompletionTokens = r[3].Int()
	}
	if !r[1].IsArray() {
		return a, errImages
	}
	media := "image/png"
	if f := r[4].Str; f != "" {
		media = "image/" + f
	}
	r[1].ForEach(func(_, v gjson.Result) bool {
		if s := v.Get("b64_json"); s.Type == gjson.String && s.Str != "" {
			a.Images = append(a.Images, dialect.Image{B64: s.Str, MediaType: media})
		}
		return true
	})
	return a, nil
}

var _ dialect.ImageGenerator = (*Dialect)(nil)
