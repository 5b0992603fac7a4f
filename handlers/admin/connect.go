package admin

import (
	"net/http"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/connect"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// createAuthCode answers POST /auth/keys/code: an authorization code of
// the connect flow for the management key's member (its creator, or a
// personal account's owner), as the dashboard's consent page issues one
// when the member approves. The code is the answer's data.id.
func (ar *adminRequest) createAuthCode() *apierror.Error {
	f, apiErr := ar.object()
	if apiErr != nil {
		return apiErr
	}
	req, apiErr := connect.ParseJSON(f)
	if apiErr != nil {
		return apiErr
	}
	user := ""
	switch {
	case ar.id.MgmtKey.CreatorUserID != nil:
		user = *ar.id.MgmtKey.CreatorUserID
	case ar.id.Account.Kind == storage.AccountPersonal:
		user = ar.id.Account.OwnerUserID
	}
	if user == "" {
		return apierror.New(http.StatusForbidden, "This management key has no creator member, and a connect key belongs to a member: "+
			"use a management key created with creator_user_id, or the dashboard's consent page")
	}
	iss, apiErr := connect.Issue(ar.store, ar.id.AccountID, user, req, connect.CodeTTL(ar.gw))
	if apiErr != nil {
		return apiErr
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": map[string]any{
		"id": iss.Code, "app_id": iss.App.ID, "created_at": apiTime(iss.CreatedAt),
	}})
	return nil
}

// exchangeAuthCode answers POST /auth/keys: the code and its verifier
// for the member's key, {key, user_id}.
func (ar *adminRequest) exchangeAuthCode() *apierror.Error {
	f, apiErr := ar.object()
	if apiErr != nil {
		return apiErr
	}
	code, hasCode := f.String("code")
	verifier, hasVerifier := f.String("code_verifier")
	method, _ := f.NullableString("code_challenge_method")
	var refusal *apierror.Error
	switch {
	case f.Err != nil:
		refusal = f.Err
	case !hasVerifier || verifier == "":
		refusal = apierror.BadRequest("code_verifier: required: every code is bound to a code_challenge")
	case method != nil && *method != connect.MethodS256 && *method != connect.MethodPlain:
		refusal = apierror.BadRequest("code_challenge_method: expected S256, plain or null")
	}
	if !hasCode || code == "" {
		if f.Err != nil {
			return f.Err
		}
		return apierror.BadRequest("code: required")
	}
	if refusal != nil {
		// A code is worth one try, whatever went wrong with the try.
		if apiErr := connect.Discard(ar.store, code); apiErr != nil {
			return apiErr
		}
		return refusal
	}
	key, k, apiErr := connect.Exchange(ar.store, code, verifier, method)
	if apiErr != nil {
		return apiErr
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"key": key, "user_id": k.CreatorUserID})
	return nil
}
