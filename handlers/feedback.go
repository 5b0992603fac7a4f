package handlers

import (
	"errors"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// maxGenerationID bounds a generation id looked up in the store.
const maxGenerationID = 256

// submitFeedback serves POST /generation/feedback: structured feedback on
// one of the account's stored generations, counted in analytics
// (feedback_count). Unknown generations and other accounts' get 404.
func (ar *adminRequest) submitFeedback() *APIError {
	f, apiErr := ar.object()
	if apiErr != nil {
		return apiErr
	}
	id, ok := f.get("generation_id")
	if !ok || id.Type != gjson.String || id.Str == "" {
		return BadRequest("generation_id: required non-empty string")
	}
	cat, ok := f.get("category")
	if !ok || cat.Type != gjson.String {
		return BadRequest("category: required string, one of " + strings.Join(storage.FeedbackCategories, ", "))
	}
	known := false
	for _, c := range storage.FeedbackCategories {
		known = known || c == cat.Str
	}
	if !known {
		return BadRequest("category: expected one of " + strings.Join(storage.FeedbackCategories, ", "))
	}
	comment, _ := f.NullableString("comment")
	if f.err != nil {
		return f.err
	}
	if comment != nil && utf8.RuneCountInString(*comment) > storage.MaxFeedbackComment {
		return BadRequest("comment: expected at most 1000 characters")
	}
	if len(id.Str) > maxGenerationID {
		return NotFound("Generation not found")
	}
	// Any id the client saw: the generation id, or a provider's id passed
	// through (Responses).
	g, err := ar.store.AccountGeneration(ar.id.AccountID, id.Str)
	if errors.Is(err, storage.ErrNotFound) {
		return NotFound("Generation not found")
	}
	if err != nil {
		return storeError(err, "Generation")
	}
	if _, err := ar.store.AddFeedback(g, cat.Str, comment); err != nil {
		return storeError(err, "Generation")
	}
	writeJSON(ar.w, http.StatusOK, map[string]any{"data": map[string]bool{"success": true}})
	return nil
}
