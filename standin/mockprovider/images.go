package mockprovider

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// OpenAI's images API (POST /images/generations), always strict, as
// OpenAI's own refuses what it does not define:
//
//   - model and prompt are required; any member the API does not define
//     is a 400 (Unknown parameter);
//   - per model, as OpenAI bounds them: dall-e-3 n=1 and its three sizes,
//     dall-e-2 n up to 10 and its three sizes, response_format only for
//     the dall-e models, background, output_format and
//     output_compression only for the others (gpt-image-1's sizes);
//   - the answer has n images (b64_json: a tiny PNG) and, for the
//     gpt-image models, usage in input_tokens and output_tokens.
//
// The model name's faults apply: error-500, error-garbage, and
// images-fewer (one image fewer than asked for, at least one).

// openAIImageMembers are the members an image generation request may have.
var openAIImageMembers = []string{"model", "prompt", "n", "size", "quality", "response_format", "style", "user",
	"background", "output_format", "output_compression", "moderation", "stream", "partial_images"}

// tinyPNG is a 1x1 PNG.
var tinyPNG = base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"))

func (m *Handler) serveOpenAIImages(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		writeMethodNotAllowed(w, http.MethodPost)
		return nil
	}
	body, apiErr := readMockBody(w, r)
	if apiErr != nil {
		writeError(w, apiErr)
		return nil
	}
	req := gjson.ParseBytes(body)
	model := req.Get("model").Str
	if msg, param := checkOpenAIImages(req); msg != "" {
		var e openAIError
		e.Error.Message, e.Error.Type, e.Error.Code = msg, "invalid_request_error", param
		writeJSON(w, http.StatusBadRequest, e)
		return nil
	}
	if writeInjectedError(w, model) {
		return nil
	}
	n := max(int(req.Get("n").Int()), 1)
	if strings.Contains(model, "images-fewer") && n > 1 {
		n--
	}
	type image struct {
		B64 string `json:"b64_json"`
	}
	out := struct {
		Created int64          `json:"created"`
		Data    []image        `json:"data"`
		Usage   map[string]any `json:"usage,omitempty"`
	}{Created: time.Now().Unix()}
	for range n {
		out.Data = append(out.Data, image{tinyPNG})
	}
	if !strings.HasPrefix(model, "dall-e") {
		in := countWords(req.Get("prompt").Str)
		out.Usage = map[string]any{"input_tokens": in, "output_tokens": 272 * n, "total_tokens": in + 272*n,
			"input_tokens_details": map[string]int{"text_tokens": in, "image_tokens": 0}}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// checkOpenAIImages is the 400's message and parameter of a request
// OpenAI's images API refuses; "" when it takes it.
func checkOpenAIImages(req gjson.Result) (msg, param string) {
	req.ForEach(func(k, _ gjson.Result) bool {
		if !slices.Contains(openAIImageMembers, k.Str) {
			msg, param = fmt.Sprintf("Unknown parameter: '%s'.", k.Str), k.Str
		}
		return msg == ""
	})
	if msg != "" {
		return msg, param
	}
	model := req.Get("model").Str
	if model == "" {
		return "Missing required parameter: 'model'.", "model"
	}
	if p := req.Get("prompt"); p.Type != gjson.String || p.Str == "" {
		return "Missing required parameter: 'prompt'.", "prompt"
	}
	maxN, sizes, dalle := 10, []string{"1024x1024", "1536x1024", "1024x1536", "auto"}, false
	switch {
	case strings.HasPrefix(model, "dall-e-3"):
		maxN, sizes, dalle = 1, []string{"1024x1024", "1792x1024", "1024x1792"}, true
	case strings.HasPrefix(model, "dall-e-2"):
		sizes, dalle = []string{"256x256", "512x512", "1024x1024"}, true
	}
	if n := req.Get("n"); n.Exists() && (n.Int() < 1 || int(n.Int()) > maxN) {
		if maxN == 1 {
			return "Invalid 'n': integer must be 1 for this model.", "n"
		}
		return fmt.Sprintf("Invalid 'n': integer above maximum value. Expected a value <= %d, but got %d instead.", maxN, n.Int()), "n"
	}
	if s := req.Get("size"); s.Exists() && !slices.Contains(sizes, s.Str) {
		return fmt.Sprintf("Invalid value: '%s'. Supported values are: '%s'.", s.Str, strings.Join(sizes, "', '")), "size"
	}
	for _, name := range []string{"background", "output_format", "output_compression", "moderation"} {
		if dalle && req.Get(name).Exists() {
			return fmt.Sprintf("Unknown parameter: '%s'.", name), name
		}
	}
	if !dalle && req.Get("response_format").Exists() {
		return "Unknown parameter: 'response_format'.", "response_format"
	}
	return "", ""
}
