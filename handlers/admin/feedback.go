package admin

import (
	"errors"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// maxGenerationID bounds a generation id looked up in the store.
const maxGenerationID = 256

// submitFeedback serves POST /generation/feedback: structured feedback on
// one of the account's stored generations, counted in analytics
// (feedback_count). Unknown generations and other accounts' get 404.
func (ar *adminRequest) submitFeedback() *apierror.Error {
	f, apiErr := ar.object()
	if apiErr != nil {
		return apiErr
	}
	id, ok := f.Get("generation_id")
	if !ok || id.Type != gjson.String || id.Str == "" {
		return apierror.BadRequest("generation_id: required non-empty string")
	}
	cat, ok := f.Get("category")
	if !ok || cat.Type != gjson.String {
		return apierror.BadRequest("category: required string, one of " + strings.Join(storage.FeedbackCategories, ", "))
	}
	known := false
	for _, c := range storage.FeedbackCategories {
		known = known || c == cat.Str
	}
	if !known {
		return apierror.BadRequest("category: expected one of " + strings.Join(storage.FeedbackCategories, ", "))
	}
	comment, _ := f.NullableString("comment")
	if f.Err != nil {
		return f.Err
	}
	if comment != nil && utf8.RuneCountInString(*comment) > storage.MaxFeedbackComment {
		return apierror.BadRequest("comment: expected at most 1000 characters")
	}
	if len(id.Str) > maxGenerationID {
		return apierror.NotFound("Generation not found")
	}
	// Any id the client saw: the generation id, or a provider's id passed
	// through (Responses).
	g, err := ar.store.AccountGeneration(ar.id.AccountID, id.Str)
	if errors.Is(err, storage.ErrNotFound) {
		return generationNotFound(err)
	}
	if err != nil {
		return storeError(err, "Generation")
	}
	if _, err := ar.store.AddFeedback(g, cat.Str, comment); err != nil {
		return storeError(err, "Generation")
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": map[string]bool{"success": true}})
	return nil
}
