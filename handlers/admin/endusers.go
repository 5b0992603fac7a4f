package admin

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// End users are the account's own users, named by the `user` field of
// inference requests: GET, POST /end-users; GET, PATCH, DELETE
// /end-users/{user}. An end user is created on the first request that names
// it (or by POST); DELETE deactivates it, and the requests of a deactivated
// end user are refused with 403 by the router until PATCH reactivates it.

// endUsersPageSize is the default and maximum page of GET /end-users.
const (
	endUsersDefaultPage = 100
	endUsersMaxPage     = 1000
)

// endUserView is an end user with its usage totals.
type endUserView struct {
	User             string       `json:"user"`
	Name             *string      `json:"name"`
	IsActive         bool         `json:"is_active"`
	Usage            money.Amount `json:"usage"`
	BYOKUsage        money.Amount `json:"byok_usage"`
	Requests         int64        `json:"requests"`
	PromptTokens     int64        `json:"prompt_tokens"`
	CompletionTokens int64        `json:"completion_tokens"`
	CreatedAt        string       `json:"created_at"`
	UpdatedAt        string       `json:"updated_at"`
	DeactivatedAt    *string      `json:"deactivated_at"`
}

func (ar *adminRequest) endUserView(u storage.EndUser) endUserView {
	s := ar.store.EndUserUsage(u.AccountID, u.User)
	return endUserView{
		User: u.User, Name: u.Name, IsActive: u.Active,
		Usage: s.Usage, BYOKUsage: s.BYOKUsage, Requests: s.Requests,
		PromptTokens: s.PromptTokens, CompletionTokens: s.CompletionTokens,
		CreatedAt: apiTime(u.CreatedAt), UpdatedAt: apiTime(u.UpdatedAt), DeactivatedAt: apiTimePtr(u.DeactivatedAt),
	}
}

func (ar *adminRequest) listEndUsers() *apierror.Error {
	q := ar.r.URL.Query()
	offset, limit := 0, endUsersDefaultPage
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return apierror.BadRequest("offset: expected a non-negative integer")
		}
		offset = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > endUsersMaxPage {
			return apierror.BadRequest("limit: expected an integer from 1 to 1000")
		}
		limit = n
	}
	var active *bool
	switch v := q.Get("is_active"); v {
	case "":
	case "true", "false":
		b := v == "true"
		active = &b
	default:
		return apierror.BadRequest("is_active: expected true or false")
	}
	all := ar.store.ListEndUsers(ar.id.AccountID)
	if active != nil {
		kept := all[:0]
		for _, u := range all {
			if u.Active == *active {
				kept = append(kept, u)
			}
		}
		all = kept
	}
	total := len(all)
	page := all[min(offset, total):min(offset+limit, total)]
	out := make([]endUserView, len(page))
	for i, u := range page {
		out[i] = ar.endUserView(u)
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": out, "total_count": total})
	return nil
}

// endUserName reads the optional `name` (string or null).
func endUserName(f *reqbody.Fields) (*string, bool) {
	name, ok := f.NullableString("name")
	if ok && name != nil && (strings.TrimSpace(*name) == "" || len(*name) > 256) && f.Err == nil {
		f.Err = apierror.BadRequest("name: expected a non-empty string of at most 256 bytes, or null")
	}
	return name, ok
}

func (ar *adminRequest) createEndUser() *apierror.Error {
	f, apiErr := ar.object()
	if apiErr != nil {
		return apiErr
	}
	user, ok := f.String("user")
	if f.Err != nil {
		return f.Err
	}
	if !ok {
		return apierror.BadRequest("user: required string")
	}
	if err := storage.ValidEndUser(user); err != nil {
		return apierror.BadRequest("user: expected a string of 1 to 256 characters")
	}
	name, _ := endUserName(f)
	if f.Err != nil {
		return f.Err
	}
	u, err := ar.store.CreateEndUser(ar.id.AccountID, user, name)
	if errors.Is(err, storage.ErrExists) {
		return apierror.New(http.StatusConflict, "End user "+strconv.Quote(user)+" already exists")
	}
	if err != nil {
		return storeError(err, "Account")
	}
	apierror.WriteJSON(ar.w, http.StatusCreated, map[string]any{"data": ar.endUserView(u)})
	return nil
}

func (ar *adminRequest) getEndUser(user string) *apierror.Error {
	u, ok := ar.store.EndUser(ar.id.AccountID, user)
	if !ok {
		return apierror.NotFound("End user not found")
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": ar.endUserView(u)})
	return nil
}

func (ar *adminRequest) updateEndUser(user string) *apierror.Error {
	if _, ok := ar.store.EndUser(ar.id.AccountID, user); !ok {
		return apierror.NotFound("End user not found")
	}
	f, apiErr := ar.object()
	if apiErr != nil {
		return apiErr
	}
	name, hasName := endUserName(f)
	active, hasActive := f.Bool("is_active")
	if f.Err != nil {
		return f.Err
	}
	u, err := ar.store.UpdateEndUser(ar.id.AccountID, user, func(u *storage.EndUser) error {
		reqbody.SetIf(&u.Name, name, hasName)
		if hasActive {
			u.SetActive(active, now())
		}
		return nil
	})
	if err != nil {
		return storeError(err, "End user")
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": ar.endUserView(u)})
	return nil
}

func (ar *adminRequest) deactivateEndUser(user string) *apierror.Error {
	u, err := ar.store.SetEndUserActive(ar.id.AccountID, user, false)
	if err != nil {
		return storeError(err, "End user")
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": ar.endUserView(u)})
	return nil
}
