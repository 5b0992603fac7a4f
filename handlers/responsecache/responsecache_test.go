package responsecache

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/storage/respcache"
)

func TestCanonicalKeysTheSameRequestAlike(t *testing.T) {
	base := `{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	h, ok := Canonical(dialect.Chat, []byte(base))
	if !ok {
		t.Fatal("a chat body has no hash")
	}
	for _, same := range []string{
		`{"messages":[{"content":"hi","role":"user"}],"max_tokens":16,"model":"m"}`,
		`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"user":"u-1","n":1,"top_p":1,"metadata":{"a":"b"}}`,
		`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"stream":false,"session_id":"s"}`,
	} {
		if got, _ := Canonical(dialect.Chat, []byte(same)); got != h {
			t.Errorf("%s keys apart from %s", same, base)
		}
	}
	for _, other := range []string{
		`{"model":"m","max_tokens":17,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi!"}]}`,
		`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"n":2}`,
		`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"stream":true}`,
	} {
		if got, _ := Canonical(dialect.Chat, []byte(other)); got == h {
			t.Errorf("%s keys as %s", other, base)
		}
	}
	if got, _ := Canonical(dialect.Responses, []byte(base)); got == h {
		t.Error("another API's request keys alike")
	}
	if _, ok := Canonical(dialect.Chat, []byte(`[1]`)); ok {
		t.Error("a body that is no object has a hash")
	}
}

func TestCacheControl(t *testing.T) {
	for _, tc := range []struct {
		header       []string
		lookup, keep bool
		maxAge       time.Duration
		bad          bool
	}{
		{nil, true, true, 0, false},
		{[]string{"no-cache"}, false, true, 0, false},
		{[]string{"No-Store"}, false, false, 0, false},
		{[]string{"max-age=60"}, true, true, time.Minute, false},
		{[]string{"private, max-age=\"30\""}, true, true, 30 * time.Second, false},
		{[]string{"max-age=0"}, false, true, 0, false},
		{[]string{"max-age=soon"}, false, false, 0, true},
		{[]string{"max-age=-1"}, false, false, 0, true},
		{[]string{"immutable", "no-transform"}, true, true, 0, false},
	} {
		lookup, keep, maxAge, apiErr := cacheControl(tc.header)
		if (apiErr != nil) != tc.bad || !tc.bad && (lookup != tc.lookup || keep != tc.keep || maxAge != tc.maxAge) {
			t.Errorf("%q: lookup %v keep %v max-age %v err %v", tc.header, lookup, keep, maxAge, apiErr)
		}
	}
}

func TestUnseeded(t *testing.T) {
	for body, want := range map[string]bool{
		`{"temperature":0.7}`:          true,
		`{"temperature":0.7,"seed":1}`: false,
		`{"temperature":0}`:            false,
		`{}`:                           false,
	} {
		if got := unseeded([]byte(body)); got != want {
			t.Errorf("unseeded(%s) = %v", body, got)
		}
	}
}

func sealer(t *testing.T, b byte) *storage.Sealer {
	s, err := storage.NewSealer(bytes.Repeat([]byte{b}, storage.SealerKeySize))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestEntrySealedToItsKey(t *testing.T) {
	c := &Cache{sealer: sealer(t, 1)}
	k := respcache.Key{Scope: "acct-1", Model: "m", Hash: [32]byte{1}}
	e := &entry{genID: "gen-1", created: time.Unix(100, 0), contentType: "application/json", body: []byte(`{"x":1}`)}
	raw := c.seal(k, e)
	if bytes.Contains(raw, e.body) {
		t.Fatal("the sealed entry holds the answer in the clear")
	}
	got, ok := c.open(k, raw)
	if !ok || got.genID != "gen-1" || string(got.body) != `{"x":1}` || got.contentType != "application/json" || !got.created.Equal(e.created) {
		t.Fatalf("open = %+v, %v", got, ok)
	}
	// Another tenant's key, a flipped byte, a truncation, another sealing
	// key, a plain entry: each a miss.
	other := k
	other.Scope = "acct-2"
	flipped := bytes.Clone(raw)
	flipped[len(flipped)-1] ^= 1
	plain := (&Cache{}).seal(k, e)
	for name, tc := range map[string]struct {
		c   *Cache
		k   respcache.Key
		raw []byte
	}{
		"another scope":  {c, other, raw},
		"flipped":        {c, k, flipped},
		"truncated":      {c, k, raw[:len(raw)/2]},
		"another sealer": {&Cache{sealer: sealer(t, 2)}, k, raw},
		"plain":          {c, k, plain},
		"empty":          {c, k, nil},
	} {
		if _, ok := tc.c.open(tc.k, tc.raw); ok {
			t.Errorf("%s: the entry opened", name)
		}
	}
	if _, ok := (&Cache{}).open(k, plain); !ok {
		t.Error("a plain entry of a cache without sealing did not open")
	}
}

func TestConfigCaddyfile(t *testing.T) {
	d := caddyfile.NewTestDispenser(`response_cache {
		models a/b *
		ttl 5m
		max_entry_bytes 2KiB
		max_bytes 1MB
		unseeded
		price 0.5
		scope workspace
	}`)
	d.Next()
	var c Config
	if err := c.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	if len(c.Models) != 2 || time.Duration(c.TTL) != 5*time.Minute || c.MaxEntryBytes != 2048 || c.MaxBytes != 1000000 ||
		!c.Unseeded || c.Price != "0.5" || c.Scope != ScopeWorkspace {
		t.Fatalf("config %+v", c)
	}
	for _, bad := range []string{
		"response_cache {\n models\n}", "response_cache {\n ttl 0s\n}", "response_cache {\n price -1\n}",
		"response_cache {\n max_bytes lots\n}", "response_cache {\n scope team\n}", "response_cache {\n colour red\n}",
	} {
		d := caddyfile.NewTestDispenser(bad)
		d.Next()
		if err := new(Config).UnmarshalCaddyfile(d); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// A request planned, missed, kept and then answered from the table.
func TestRequestMissKeepHit(t *testing.T) {
	c, err := New(&Config{Models: []string{"m"}}, sealer(t, 3), nil)
	if err != nil {
		t.Fatal(err)
	}
	id := &gateway.Identity{Principal: storage.Principal{AccountID: "acct-1"}}
	route := &upstream.Route{Kind: dialect.Chat, Model: &catalog.Model{ID: "m"}, Provider: &catalog.Provider{Name: "p", Model: "pm"}}
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	provider := func(calls *int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			*calls++
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"answer":1}`))
		})
	}
	var calls int
	serve := func(q *Request) *httptest.ResponseRecorder {
		next := q.Attempt(handlerOf(provider(&calls)), route, true)
		w := httptest.NewRecorder()
		if err := next.ServeHTTP(w, httptest.NewRequest("POST", "/", nil)); err != nil {
			t.Fatal(err)
		}
		return w
	}
	var q Request
	if apiErr := q.Plan(c, context.Background(), nil, http.Header{}, id, route, body, false); apiErr != nil || !q.On() {
		t.Fatalf("Plan: %v, on %v", apiErr, q.On())
	}
	if w := serve(&q); w.Header().Get("X-Cache") != "MISS" || calls != 1 || q.Hit() {
		t.Fatalf("miss: X-Cache %q, %d calls", w.Header().Get("X-Cache"), calls)
	}
	q.Keep("gen-1", true)

	var again Request
	_ = again.Plan(c, context.Background(), nil, http.Header{}, id, route, body, false)
	w := serve(&again)
	if w.Header().Get("X-Cache") != "HIT" || calls != 1 || !again.Hit() || again.SourceID() != "gen-1" || w.Body.String() != `{"answer":1}` ||
		w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("hit: X-Cache %q, %d calls, body %q", w.Header().Get("X-Cache"), calls, w.Body)
	}

	// Another account misses; so does a request with plugins or for
	// another model (the cache does not apply to them).
	other := &gateway.Identity{Principal: storage.Principal{AccountID: "acct-2"}}
	var theirs Request
	_ = theirs.Plan(c, context.Background(), nil, http.Header{}, other, route, body, false)
	if serve(&theirs); theirs.Hit() || calls != 2 {
		t.Fatal("another account's request hit")
	}
	var withPlugins Request
	if _ = withPlugins.Plan(c, context.Background(), nil, http.Header{}, id, route, body, true); withPlugins.On() {
		t.Fatal("a request with plugins is cached")
	}
}

// handlerOf adapts an http.Handler to the provider's handler.
func handlerOf(h http.Handler) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		h.ServeHTTP(w, r)
		return nil
	})
}

// Only a whole 200 within max_entry_bytes, not encoded, is kept.
func TestRecorderKeepsOnlyWholeAnswers(t *testing.T) {
	for name, tc := range map[string]struct {
		status   int
		encoding string
		body     string
		want     bool
	}{
		"ok":        {200, "", "0123456789", true},
		"error":     {500, "", "{}", false},
		"over":      {200, "", "0123456789ab", false},
		"encoded":   {200, "gzip", "0123456789", false},
		"empty 200": {200, "", "", false},
	} {
		w := httptest.NewRecorder()
		r := recorder{ResponseWriter: w, max: 10}
		if tc.encoding != "" {
			r.Header().Set("Content-Encoding", tc.encoding)
		}
		r.WriteHeader(tc.status)
		for i := 0; i < len(tc.body); i += 4 {
			_, _ = r.Write([]byte(tc.body[i:min(i+4, len(tc.body))]))
		}
		if got := r.storable(); got != tc.want {
			t.Errorf("%s: storable %v", name, got)
		}
		if w.Body.String() != tc.body || w.Code != tc.status {
			t.Errorf("%s: the client got %d %q", name, w.Code, w.Body)
		}
	}
}
