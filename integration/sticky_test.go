package integration

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// stickyTap is one provider of the model st/duo, in front of a mock
// provider: it counts the turns of each conversation it served (named by
// its first user message) and fails (500) while failing is set.
type stickyTap struct {
	name    string
	srv     *httptest.Server
	target  atomic.Pointer[url.URL]
	failing atomic.Bool
	mu      sync.Mutex
	served  map[string]int
	leaked  atomic.Value // a session id that reached the provider
}

func startStickyTap(t *testing.T, name string) *stickyTap {
	tap := &stickyTap{name: name, served: map[string]int{}}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(tap.target.Load()) }}
	tap.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(b)))
		if gjson.GetBytes(b, "session_id").Exists() || r.Header.Get("X-Session-Id") != "" {
			tap.leaked.Store(string(b))
		}
		if tap.failing.Load() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":{"message":"provider down","type":"server_error"}}`)
			return
		}
		conv := gjson.GetBytes(b, `messages.#(role=="user").content`).String()
		tap.mu.Lock()
		tap.served[conv]++
		tap.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(tap.srv.Close)
	return tap
}

// total is the turns it served.
func (tap *stickyTap) total() int {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	n := 0
	for _, v := range tap.served {
		n += v
	}
	return n
}

func (tap *stickyTap) turns(conv string) int {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	return tap.served[conv]
}

// withStickyModel adds st/duo, served by the two taps at one price, and
// load balances by price (the harness pins the catalog's order); the taps
// forward to the first replica's mock provider.
func withStickyModel(t *testing.T, taps ...*stickyTap) func(cfg, mock string) string {
	return func(cfg, mock string) string {
		u, _ := url.Parse("http://" + mock)
		for _, tap := range taps {
			tap.target.CompareAndSwap(nil, u)
		}
		block := "\t\tmodel st/duo {\n\t\t\tcontext_length 8192\n\t\t\tpricing {\n\t\t\t\tprompt 0.000001\n\t\t\t\tcompletion 0.000002\n\t\t\t}\n"
		for _, tap := range taps {
			block += fmt.Sprintf("\t\t\tprovider %s %s/v1 {\n\t\t\t\tmodel tollgate-mock\n\t\t\t\tapi_key mock\n\t\t\t}\n", tap.name, tap.srv.URL)
		}
		block += "\t\t}\n"
		cfg = replaceOnce(t, cfg, "\t\tmodel tollgate-mock:free {\n", block+"\t\tmodel tollgate-mock:free {\n")
		return replaceOnce(t, cfg, "load_balancing ordered", "load_balancing price")
	}
}

// conversation is one chat's messages so far.
type conversation struct {
	name string
	body string
}

func newConversation(name string) *conversation {
	return &conversation{name: name, body: `{"model":"st/duo","max_tokens":16,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":` + jsonString(name) + `}]}`}
}

func jsonString(s string) string {
	b, _ := sjson.Set("", "s", s)
	return gjson.Get(b, "s").Raw
}

// turn sends the conversation's next turn to c and keeps the answer and
// a new user message in it.
func (cv *conversation) turn(t *testing.T, c *client, key string, n int) {
	t.Helper()
	r := c.api("POST", "/chat/completions", key, cv.body).expect(t, 200)
	answer := r.JSON.Get("choices.0.message.content").String()
	var err error
	if cv.body, err = sjson.Set(cv.body, "messages.-1", map[string]string{"role": "assistant", "content": answer}); err == nil {
		cv.body, err = sjson.Set(cv.body, "messages.-1", map[string]string{"role": "user", "content": fmt.Sprintf("and turn %d?", n)})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// stuck is the share of the conversation's turns its busiest provider
// served, in percent, and that provider.
func stuck(conv string, turns int, taps ...*stickyTap) (int, *stickyTap) {
	best, by := 0, taps[0]
	for _, tap := range taps {
		if n := tap.turns(conv); n > best {
			best, by = n, tap
		}
	}
	return best * 100 / turns, by
}

// Five conversations of ten turns each, interleaved over two replicas on
// one redis-server, two equally priced providers: each conversation stays
// on one provider (at least 95% of its turns), which load balancing alone
// does not do (checked with sticky routing off); the endpoint that
// served a conversation keeps it after a failover; session ids key
// conversations and never reach the provider; a bad one is a 400.
func TestStickyRoutingAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	pa, pb := startStickyTap(t, "pa"), startStickyTap(t, "pb")
	edit := withStickyModel(t, pa, pb)
	ps := []*process{startReplicaEdited(t, "address "+srv.Addr, edit), startReplicaEdited(t, "address "+srv.Addr, edit)}
	cs := replicaClients(t, ps)
	org := cs[0].newTenant("organization", "100")
	key, _ := cs[0].newKey(org.MgmtKey, `{"name":"sticky"}`)
	within(t, feedBound, "the key authenticates at replica 1", func() bool {
		r, _ := cs[1].try("GET", cs[1].gateway+"/api/v1/key", key, nil)
		return r.Status == 200
	})

	const convs, turns = 5, 10
	run := func(prefix string, cs []*client) []*conversation {
		var cv []*conversation
		for i := range convs {
			cv = append(cv, newConversation(fmt.Sprintf("%s conversation %d", prefix, i)))
		}
		for n := range turns {
			for i, c := range cv {
				c.turn(t, cs[(i+n)%len(cs)], key, n+2)
			}
		}
		return cv
	}
	cv := run("sticky", cs)
	for _, c := range cv {
		if share, by := stuck(c.name, turns, pa, pb); share < 95 {
			t.Errorf("%s: %d%% of its turns on %s (pa %d, pb %d), want at least 95%%", c.name, share, by.name, pa.turns(c.name), pb.turns(c.name))
		}
	}

	// Failover: the conversation's provider fails, the other serves and
	// keeps it once the first is back.
	c0 := cv[0]
	_, first := stuck(c0.name, turns, pa, pb)
	other := pa
	if first == pa {
		other = pb
	}
	before := stuckKeys(t, srv, other.name)
	first.failing.Store(true)
	c0.turn(t, cs[0], key, 12)
	first.failing.Store(false)
	// The gateway records the takeover at settlement, which may follow
	// the answer's last byte: a client's next turn comes later than
	// this test's.
	within(t, feedBound, "the takeover is stored", func() bool { return stuckKeys(t, srv, other.name) == before+1 })
	for n := range 4 {
		c0.turn(t, cs[n%2], key, 13+n)
	}
	if got := other.turns(c0.name); got != 5 {
		t.Errorf("after %s failed: %s served %d of the 5 turns since, want all", first.name, other.name, got)
	}

	// A session id keys the conversation whatever its messages: turns
	// that each start anew stay on one provider, header or body.
	for _, via := range []string{"header", "body"} {
		beforeA, beforeB := pa.total(), pb.total()
		for n := range 6 {
			body := `{"model":"st/duo","max_tokens":16,"messages":[{"role":"user","content":"x"}]}`
			body, _ = sjson.Set(body, "messages.0.content", fmt.Sprintf("session in the %s, a new start %d", via, n))
			var hdr map[string]string
			if via == "header" {
				hdr = map[string]string{"X-Session-Id": "sess-" + via}
			} else {
				body, _ = sjson.Set(body, "session_id", "sess-"+via)
			}
			r := cs[n%2].mustPost("/chat/completions", key, body, hdr).expect(t, 200)
			if n == 0 {
				// The generation is the session's, in GET /generation.
				id := r.JSON.Get("id").Str
				var g gjson.Result
				within(t, feedBound, "the generation at the other replica", func() bool {
					res, _ := cs[1-n%2].try("GET", cs[1-n%2].gateway+"/api/v1/generation?id="+id, key, nil)
					g = res.JSON.Get("data")
					return res.Status == 200
				})
				if got := g.Get("session_id").Str; got != "sess-"+via {
					t.Errorf("GET /generation: session_id %q, want sess-%s", got, via)
				}
			}
		}
		if a, b := pa.total()-beforeA, pb.total()-beforeB; a != 6 && b != 6 {
			t.Errorf("session id in the %s: pa served %d, pb %d of 6 turns", via, a, b)
		}
	}
	for _, tap := range []*stickyTap{pa, pb} {
		if leaked := tap.leaked.Load(); leaked != nil {
			t.Errorf("a session id reached provider %s: %s", tap.name, leaked)
		}
	}

	// Bad session ids, on every inference route.
	long := strings.Repeat("s", 257)
	for _, tt := range []struct {
		path, body string
		hdr        map[string]string
		want       string
	}{
		{"/chat/completions", `{"model":"st/duo","messages":[{"role":"user","content":"x"}],"session_id":"` + long + `"}`, nil, "session_id: expected at most 256 characters"},
		{"/chat/completions", `{"model":"st/duo","messages":[{"role":"user","content":"x"}],"session_id":42}`, nil, "session_id: expected a string"},
		{"/chat/completions", `{"model":"st/duo","messages":[{"role":"user","content":"x"}]}`, map[string]string{"X-Session-Id": long}, "x-session-id: expected at most 256 characters"},
		{"/responses", `{"model":"st/duo","input":"x","session_id":["a"]}`, nil, "session_id: expected a string"},
		{"/messages", `{"model":"st/duo","max_tokens":5,"messages":[{"role":"user","content":"x"}],"session_id":{"id":1}}`, nil, "session_id: expected a string"},
		{"/completions", `{"model":"st/duo","prompt":"x","session_id":"` + long + `"}`, nil, "session_id: expected at most 256 characters"},
	} {
		cs[0].mustPost(tt.path, key, tt.body, tt.hdr).expectError(t, 400, tt.want)
	}

	// The hit rate is in each replica's metrics.
	for i, p := range ps {
		r := cs[i].do("GET", "http://"+p.admin+"/metrics", "", nil).expect(t, 200)
		if !strings.Contains(string(r.Body), `tollgate_sticky_routing_total{outcome="hit"}`) {
			t.Errorf("replica %d's metrics have no sticky hits", i)
		}
	}

	// Without sticky routing, load balancing alone spreads the same
	// conversations over both providers: the check above would fail.
	off := []*process{
		startReplicaEdited(t, "address "+srv.Addr, edit, "sticky_idle off"),
		startReplicaEdited(t, "address "+srv.Addr, edit, "sticky_idle off"),
	}
	offClients := replicaClients(t, off)
	within(t, feedBound, "the key authenticates at the new replicas", func() bool {
		r, _ := offClients[1].try("GET", offClients[1].gateway+"/api/v1/key", key, nil)
		return r.Status == 200
	})
	spread := 0
	for _, c := range run("unsticky", offClients) {
		if share, _ := stuck(c.name, turns, pa, pb); share < 95 {
			spread++
		}
	}
	if spread == 0 {
		t.Error("without sticky routing every conversation stayed on one provider: the test proves nothing")
	}
}

// stuckKeys counts the conversations srv's affinity table sticks to the
// endpoint name.
func stuckKeys(t *testing.T, srv *redistest.Server, name string) int {
	t.Helper()
	keys, err := srv.Do("KEYS", "*~st/*")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, k := range keys.([]any) {
		v, err := srv.Do("GET", k)
		if err == nil && v == name {
			n++
		}
	}
	return n
}
