package caddymodule

import (
	"errors"
	"net/url"
	"strings"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/admin"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// answered is the status an operatorFunc returns when it wrote the answer
// itself.
const answered = 0

// forAccount serves /tollgate/accounts/{id}/<route> as the public API's
// management route /api/v1/<route> of the account {id}: the same code,
// rules and answers as a management key of the account gets.
func forAccount(c *operatorCall) (int, any, *apierror.Error) {
	// "", "tollgate", "accounts", the id, then the public route.
	sub := "/" + strings.SplitN(c.r.URL.Path, "/", 5)[4]
	c.w.Header().Set("Cache-Control", "no-store") // a created key's string
	if e := admin.New(c.app, c.log, nil).ServeForAccount(c.w, c.r, c.acct, sub); e != nil {
		return 0, nil, e
	}
	return answered, nil, nil
}

// generation serves GET /tollgate/generations/{gen}: any account's
// generation by its id, in the public GET /generation shape.
func (c *operatorCall) generation() (int, any, *apierror.Error) {
	id := c.r.PathValue("gen")
	g, err := c.store.Generation(id)
	if exp := (*storage.ExpiredError)(nil); errors.As(err, &exp) {
		return 0, nil, apierror.NotFound(err.Error())
	}
	if errors.Is(err, storage.ErrNotFound) {
		return 0, nil, apierror.NotFound("generation " + id + " not found")
	}
	if err != nil {
		return 0, nil, c.storeError(err)
	}
	acct, ok := c.store.Account(g.AccountID)
	if !ok {
		return 0, nil, accountNotFound(g.AccountID)
	}
	r := c.r.Clone(c.r.Context())
	r.URL.RawQuery = url.Values{"id": {g.ID}}.Encode()
	if e := admin.New(c.app, c.log, nil).ServeForAccount(c.w, r, acct, "/generation"); e != nil {
		return 0, nil, e
	}
	return answered, nil, nil
}
