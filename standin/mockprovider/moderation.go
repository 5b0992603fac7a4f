package mockprovider

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// serveModeration answers POST .../moderations in OpenAI's shape, as
// strictly as OpenAI checks it: a JSON object with `input` (a string or a
// non-empty array of strings) and an optional `model`, nothing else; a
// bearer key is required. An input is flagged when it contains one of the
// mock's trigger words (moderationTriggers), with that word's category. A
// model containing error-500 (etc.) injects the fault, as for the other
// routes.
func (m *Handler) serveModeration(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		writeMethodNotAllowed(w, http.MethodPost)
		return nil
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		writeError(w, &apiError{Code: http.StatusUnauthorized, Message: "missing bearer key"})
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		writeError(w, badRequest("unreadable body"))
		return nil
	}
	var req map[string]json.RawMessage
	if err := json.Unmarshal(b, &req); err != nil || req == nil {
		writeError(w, badRequest("body: expected a JSON object"))
		return nil
	}
	for k := range req {
		if k != "input" && k != "model" {
			writeError(w, badRequest(fmt.Sprintf("Unrecognized request argument supplied: %s", k)))
			return nil
		}
	}
	var model string
	if raw, ok := req["model"]; ok {
		if err := json.Unmarshal(raw, &model); err != nil {
			writeError(w, badRequest("model: expected a string"))
			return nil
		}
	}
	if writeInjectedError(w, model) {
		return nil
	}
	var inputs []string
	var one string
	raw, ok := req["input"]
	switch {
	case !ok:
		writeError(w, badRequest("input: required"))
		return nil
	case json.Unmarshal(raw, &one) == nil:
		inputs = []string{one}
	case json.Unmarshal(raw, &inputs) == nil && len(inputs) > 0:
	default:
		writeError(w, badRequest("input: expected a string or a non-empty array of strings"))
		return nil
	}
	type result struct {
		Flagged        bool               `json:"flagged"`
		Categories     map[string]bool    `json:"categories"`
		CategoryScores map[string]float64 `json:"category_scores"`
	}
	out := struct {
		ID      string   `json:"id"`
		Model   string   `json:"model"`
		Results []result `json:"results"`
	}{ID: "modr-mock", Model: "omni-moderation-latest"}
	if model != "" {
		out.Model = model
	}
	for _, in := range inputs {
		res := result{Categories: map[string]bool{}, CategoryScores: map[string]float64{}}
		lower := strings.ToLower(in)
		for word, category := range moderationTriggers {
			res.Categories[category] = res.Categories[category] || strings.Contains(lower, word)
		}
		for category, on := range res.Categories {
			res.CategoryScores[category] = 0.001
			if on {
				res.Flagged, res.CategoryScores[category] = true, 0.98
			}
		}
		out.Results = append(out.Results, res)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// moderationTriggers are the words the mock flags, with their category.
var moderationTriggers = map[string]string{
	"kill":      "violence",
	"hateful":   "hate",
	"self-harm": "self-harm",
}
