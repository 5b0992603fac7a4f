// Package images is the POST /images route's service: it checks the
// public image generation request, sends it to providers with an image
// API (dialect.ImageGenerator: OpenAI's images API) in their form,
// bounds what it may use for the hold (n images), and answers in the
// public form, charged on the images actually returned.
package images

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
)

// MaxImages is the most images one request may ask for (n).
const MaxImages = 10

// maxAnswer bounds the provider's answer the gateway reads: ten large
// images in base64.
const maxAnswer = 256 << 20

// aspectSizes are the pixel sizes of the aspect ratios an OpenAI-style
// model offers.
var aspectSizes = map[string]string{"1:1": "1024x1024", "3:2": "1536x1024", "2:3": "1024x1536", "auto": "auto"}

// enums are the public request's fields that take one of a few values.
var enums = map[string][]string{
	"quality":       {"auto", "low", "medium", "high"},
	"background":    {"auto", "transparent", "opaque"},
	"output_format": {"png", "jpeg", "webp", "svg"},
}

// Service is one checked image generation request.
type Service struct {
	req   dialect.ImageRequest
	bound billing.Usage
}

// New checks an image generation request's fields.
func New(f *reqbody.Fields) (upstream.Service, *apierror.Error) {
	s := &Service{req: dialect.ImageRequest{N: 1, OutputCompression: -1}}
	p, ok := f.Get("prompt")
	switch {
	case !ok || p.Type != gjson.String:
		return nil, apierror.BadRequest("prompt: required string")
	case strings.TrimSpace(p.Str) == "":
		return nil, apierror.BadRequest("prompt: must not be empty")
	}
	s.req.Prompt = strings.Clone(p.Str)
	if v, ok := f.Get("n"); ok && v.Type != gjson.Null {
		if v.Type != gjson.Number || v.Num < 1 || v.Num > MaxImages || float64(v.Int()) != v.Num {
			return nil, apierror.BadRequest("n: an integer from 1 to " + strconv.Itoa(MaxImages))
		}
		s.req.N = v.Int()
	}
	for name, values := range enums {
		v, ok := f.Get(name)
		if !ok || v.Type == gjson.Null {
			continue
		}
		if v.Type != gjson.String || !contains(values, v.Str) {
			return nil, apierror.BadRequest(name + ": one of " + strings.Join(values, ", "))
		}
		switch name {
		case "quality":
			s.req.Quality = v.Str
		case "background":
			s.req.Background = v.Str
		case "output_format":
			s.req.OutputFormat = v.Str
		}
	}
	if v, ok := f.Get("output_compression"); ok && v.Type != gjson.Null {
		if v.Type != gjson.Number || v.Num < 0 || v.Num > 100 || float64(v.Int()) != v.Num {
			return nil, apierror.BadRequest("output_compression: an integer from 0 to 100")
		}
		s.req.OutputCompression = v.Int()
	}
	if apiErr := s.size(f); apiErr != nil {
		return nil, apiErr
	}
	for _, name := range []string{"input_references", "resolution"} {
		if v, ok := f.Get(name); ok && v.Type != gjson.Null {
			return nil, apierror.BadRequest(name + ": not offered by this gateway's image providers")
		}
	}
	if v, ok := f.Get("stream"); ok && v.Type == gjson.True {
		return nil, apierror.BadRequest("stream: this gateway's image answers are not streamed")
	}
	s.bound = billing.Usage{Images: s.req.N, PromptTokens: billing.EstimateTokens(len(s.req.Prompt))}
	return s, nil
}

// size reads size (pixels, or auto) and aspect_ratio (an OpenAI-style
// model's three), which must agree.
func (s *Service) size(f *reqbody.Fields) *apierror.Error {
	if v, ok := f.Get("size"); ok && v.Type != gjson.Null {
		w, h, isPixels := strings.Cut(v.Str, "x")
		if v.Type != gjson.String || v.Str != "auto" && (!isPixels || !digits(w) || !digits(h)) {
			return apierror.BadRequest("size: pixels such as 1024x1024, or auto")
		}
		s.req.Size = v.Str
	}
	if v, ok := f.Get("aspect_ratio"); ok && v.Type != gjson.Null {
		size, known := aspectSizes[v.Str]
		switch {
		case v.Type != gjson.String || !known:
			return apierror.BadRequest("aspect_ratio: this gateway's image providers offer 1:1, 3:2, 2:3 and auto")
		case s.req.Size != "" && s.req.Size != size:
			return apierror.BadRequest("aspect_ratio: " + v.Str + " does not match size " + s.req.Size)
		}
		s.req.Size = size
	}
	return nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func contains(values []string, v string) bool {
	for _, x := range values {
		if x == v {
			return true
		}
	}
	return false
}

// OutputsImages reports whether m is an image generation model: priced
// per image, or listing image among its output modalities.
func OutputsImages(m *catalog.Model) bool {
	if m == nil {
		return false
	}
	return m.Pricing.ImageOutput > 0 || m.Outputs("image")
}

// Name implements upstream.Service.
func (s *Service) Name() string { return "image generation" }

// Check implements upstream.Service: the model must output images (its
// catalog entry lists image output, or prices images), its provider
// have an image API, and its model offer the count and the size asked
// for.
func (s *Service) Check(a upstream.Attempt) *apierror.Error {
	d := a.Provider.D()
	if _, ok := d.(dialect.ImageGenerator); !ok || !OutputsImages(a.Model) {
		return apierror.BadRequest("model: not an image generation model")
	}
	if _, err := s.Body(d, a.ModelFor()); err != nil {
		return upstream.BodyRefusal(err)
	}
	return nil
}

// URI implements upstream.Service.
func (s *Service) URI(d dialect.Dialect) string { return d.(dialect.ImageGenerator).ImagesURI() }

// Body implements upstream.Service.
func (s *Service) Body(d dialect.Dialect, model string) ([]byte, error) {
	req := s.req
	req.Model = model
	return d.(dialect.ImageGenerator).ImagesBody(req)
}

// Bound implements upstream.Service: n images and the prompt.
func (s *Service) Bound() billing.Usage { return s.bound }

// Answer implements upstream.Service.
func (s *Service) Answer(w http.ResponseWriter, route *upstream.Route, genID string) upstream.ServiceAnswer {
	return upstream.NewWholeAnswer(w, s, route, genID, maxAnswer)
}

// ReadAnswer implements upstream.WholeReader: an answer without an image
// is not read.
func (s *Service) ReadAnswer(route *upstream.Route, _ string, body []byte) ([]byte, billing.Usage, error) {
	ia, err := route.Dialect.(dialect.ImageGenerator).ImagesAnswer(body)
	if err == nil && len(ia.Images) == 0 {
		err = errors.New("no image")
	}
	if err != nil {
		return nil, billing.Usage{}, err
	}
	out, used := s.public(ia)
	return out, used, nil
}

// FailureBody implements upstream.WholeReader.
func (s *Service) FailureBody(err error) []byte {
	return []byte(`{"error":{"message":` + string(jsonstr.Quote("Provider returned an image answer the gateway cannot read: "+err.Error())) + `}}`)
}

// public is the public answer of ia and its usage, the images returned
// (at most n) and the prompt tokens reported (at most the bound; not
// reported: the bound), which is what is charged.
func (s *Service) public(ia dialect.ImagesAnswer) ([]byte, billing.Usage) {
	b := s.bound
	imgs := ia.Images[:min(int64(len(ia.Images)), b.Images)]
	usage := billing.Usage{Images: int64(len(imgs)), PromptTokens: b.PromptTokens}
	if ia.PromptTokens >= 0 {
		usage.PromptTokens = min(ia.PromptTokens, b.PromptTokens)
	}
	n := 128
	for _, img := range imgs {
		n += len(img.B64) + 64
	}
	out := make([]byte, 0, n)
	out = append(out, `{"created":`...)
	out = strconv.AppendInt(out, ia.Created, 10)
	out = append(out, `,"data":[`...)
	for i, img := range imgs {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"b64_json":`...)
		out = append(out, jsonstr.Quote(img.B64)...)
		if img.MediaType != "" {
			out = append(out, `,"media_type":`...)
			out = append(out, jsonstr.Quote(img.MediaType)...)
		}
		out = append(out, '}')
	}
	out = append(out, `],"usage":{"prompt_tokens":`...)
	out = strconv.AppendInt(out, usage.PromptTokens, 10)
	completion := max(ia.CompletionTokens, 0)
	out = append(out, `,"completion_tokens":`...)
	out = strconv.AppendInt(out, completion, 10)
	out = append(out, `,"total_tokens":`...)
	out = strconv.AppendInt(out, usage.PromptTokens+completion, 10)
	return append(out, "}}"...), usage
}

// Interface guards
var (
	_ upstream.Service     = (*Service)(nil)
	_ upstream.WholeReader = (*Service)(nil)
)
