package responsecache

import (
	"context"
	"crypto/sha256"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/storage/respcache"
	"github.com/tollgate-dev/caddy-tollgate/telemetry"
)

// Request is the cache's part in one request, in the request's state: its
// zero value is a request the cache does not apply to, which costs
// nothing.
type Request struct {
	c     *Cache // nil: the cache does not apply
	table respcache.Table
	ctx   context.Context
	scope string // the account
	// hash is the canonical request's (Canonical) and, with scope
	// workspace, the workspace's; the model and endpoint not yet in it.
	hash [32]byte
	// lookup: an entry may answer (no Cache-Control no-cache or
	// no-store); maxAge > 0 bounds its age. keep: the answer may be
	// kept (no no-store).
	lookup, keep bool
	maxAge       time.Duration

	// The current attempt's key and its provider handler.
	key  respcache.Key
	next caddyhttp.Handler
	// hit is the entry that answered; nil on a miss.
	hit *entry
	rec recorder
}

// Plan decides what the cache does for a routed request (c nil: nothing):
// whether the route's model is cached, what the client's Cache-Control
// asks, and the request's hash. A malformed Cache-Control max-age on a
// cached model is a 400 naming it.
func (q *Request) Plan(c *Cache, ctx context.Context, store *storage.Store, header http.Header, id *gateway.Identity, route *upstream.Route, body []byte, plugins bool) *apierror.Error {
	*q = Request{}
	if c == nil || route == nil || id == nil || plugins || route.Service != nil || route.Embeddings || !c.caches(route.Model.ID) {
		return nil
	}
	lookup, keep, maxAge, apiErr := cacheControl(header.Values("Cache-Control"))
	if apiErr != nil {
		return apiErr
	}
	if !keep || !c.cfg.Unseeded && unseeded(body) {
		return nil
	}
	hash, ok := Canonical(route.Kind, body)
	if !ok {
		return nil
	}
	if c.cfg.Scope == ScopeWorkspace && id.Key.WorkspaceID != "" {
		// The workspace's entries are its account's too (a purge of the
		// account removes them), under keys no other workspace makes.
		hash = sha256.Sum256(append(hash[:], "workspace:"+id.Key.WorkspaceID...))
	}
	*q = Request{c: c, table: c.table(store), ctx: ctx, scope: id.AccountID, hash: hash, lookup: lookup, keep: keep, maxAge: maxAge}
	return nil
}

// On reports whether the cache applies to the request.
func (q *Request) On() bool { return q.c != nil }

// Hit reports whether the cache answered the request.
func (q *Request) Hit() bool { return q.hit != nil }

// SourceID is the generation whose answer the cache replayed; "" on a
// miss.
func (q *Request) SourceID() string {
	if q.hit == nil {
		return ""
	}
	return q.hit.genID
}

// Price is what a hit is charged.
func (q *Request) Price() money.Amount { return q.c.price }

// Attempt is the handler an attempt on route is sent to, next being the
// provider's: on the first attempt (first), a stored answer replayed when
// one is found (the one lookup a request makes), else the provider,
// through a recorder of the answer when it may be kept.
func (q *Request) Attempt(next caddyhttp.Handler, route *upstream.Route, first bool) caddyhttp.Handler {
	if q.c == nil {
		return next
	}
	q.key = respcache.Key{Scope: q.scope, Model: route.Model.ID, Hash: endpointHash(q.hash, route)}
	q.next, q.hit = next, nil
	if first && q.lookup {
		q.hit = q.find()
		telemetry.ResponseCacheLookup(q.hit != nil)
	}
	return q
}

// find is the entry stored under the attempt's key, opened; nil when none
// is, it is too old for the client's max-age, or it does not open (a
// corrupt or foreign entry is a miss).
func (q *Request) find() *entry {
	raw, ok := q.table.Get(q.ctx, q.key)
	if !ok {
		return nil
	}
	e, ok := q.c.open(q.key, raw)
	if !ok {
		return nil
	}
	if q.maxAge > 0 && now().Sub(e.created) > q.maxAge {
		return nil
	}
	return e
}

// ServeHTTP replays the entry that answered, or calls the provider,
// recording its answer when it may be kept.
func (q *Request) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	setXCache(w.Header(), q.hit != nil)
	if q.hit != nil {
		return q.hit.replay(w)
	}
	if !q.keep {
		return q.next.ServeHTTP(w, r)
	}
	q.rec = recorder{ResponseWriter: w, max: q.c.cfg.MaxEntryBytes}
	return q.next.ServeHTTP(&q.rec, r)
}

// Keep stores the answer the provider gave, once its charge is durable
// (genID the generation): only a whole answer (complete), of status 200,
// within the entry bound. A hit is not stored again.
func (q *Request) Keep(genID string, complete bool) {
	if q.c == nil || q.hit != nil || !q.keep || !complete || !q.rec.storable() {
		return
	}
	e := entry{genID: genID, created: now(), contentType: q.rec.contentType, body: q.rec.buf}
	q.table.Set(q.key, q.c.seal(q.key, &e), time.Duration(q.c.cfg.TTL))
	q.rec.buf = nil
}

// endpointHash is the request's key hash on the attempt's endpoint: the
// answer a provider gave is replayed as that provider's, through the same
// translations.
func endpointHash(h [32]byte, route *upstream.Route) [32]byte {
	d := sha256.New()
	d.Write(h[:])
	for _, s := range []string{string(route.Kind), route.Model.ID, route.Provider.Name, route.Provider.Model} {
		d.Write([]byte(s))
		d.Write([]byte{0})
	}
	d.Write([]byte{flag(route.Translate), flag(route.ViaChat)})
	var out [32]byte
	d.Sum(out[:0])
	return out
}

func flag(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// cacheControl reads the client's Cache-Control: no-store (neither read
// nor kept), no-cache (not read, kept), max-age=N (read when at most N
// seconds old); other directives are ignored. A max-age that is not a
// whole number of seconds is a 400.
func cacheControl(values []string) (lookup, keep bool, maxAge time.Duration, apiErr *apierror.Error) {
	lookup, keep = true, true
	for _, v := range values {
		for d := range strings.SplitSeq(v, ",") {
			name, arg, _ := strings.Cut(strings.TrimSpace(d), "=")
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "no-store":
				lookup, keep = false, false
			case "no-cache":
				lookup = false
			case "max-age":
				n, err := strconv.ParseInt(strings.Trim(strings.TrimSpace(arg), `"`), 10, 64)
				if err != nil || n < 0 {
					return false, false, 0, apierror.BadRequest("Cache-Control: max-age must be a whole number of seconds, got " + strconv.Quote(arg))
				}
				if n == 0 {
					lookup = false
				} else if n < int64(time.Duration(1<<62)/time.Second) {
					maxAge = time.Duration(n) * time.Second
				}
			}
		}
	}
	return lookup, keep, maxAge, nil
}

// unseeded reports whether body asks for sampling (a temperature above
// 0) without a seed.
func unseeded(body []byte) bool {
	r := gjson.GetManyBytes(body, "temperature", "seed")
	return r[0].Type == gjson.Number && r[0].Float() > 0 && !r[1].Exists()
}
