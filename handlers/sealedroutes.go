package handlers

import (
	"net/http"

	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// sealedCollection is the route table of a management collection whose
// records hold secrets sealed with byok_encryption_key (BYOK credentials,
// observability destinations, private endpoints): list and create on the
// collection, get, update and delete on one item. While the gateway has no
// sealer every route answers 400 with off.
type sealedCollection struct {
	sealer              *storage.Sealer
	off                 string
	list, create        func() *APIError
	get, update, remove func(id string) *APIError
}

// guard refuses h while the gateway has no sealer.
func (c sealedCollection) guard(h func() *APIError) func() *APIError {
	return func() *APIError {
		if c.sealer == nil {
			return BadRequest(c.off)
		}
		return h()
	}
}

// guardID is guard for a handler of one item.
func (c sealedCollection) guardID(h func(id string) *APIError, id string) func() *APIError {
	return c.guard(func() *APIError { return h(id) })
}

// serveCollection answers GET (list) and POST (create) on the collection.
func (c sealedCollection) serveCollection(r *http.Request) *APIError {
	return methods(r, map[string]func() *APIError{"GET": c.guard(c.list), "POST": c.guard(c.create)})
}

// serveItem answers GET, PATCH and DELETE on the item id.
func (c sealedCollection) serveItem(r *http.Request, id string) *APIError {
	return methods(r, map[string]func() *APIError{
		"GET":    c.guardID(c.get, id),
		"PATCH":  c.guardID(c.update, id),
		"DELETE": c.guardID(c.remove, id),
	})
}
