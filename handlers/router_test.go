package handlers

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/admin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/routing"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

func TestValidateInference(t *testing.T) {
	tests := []struct {
		sub  string
		body string
		want string // "" for valid
	}{
		{"/chat/completions", `{"model":"m","messages":[]}`, ""},
		{"/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":1}`, ""},
		{"/chat/completions", `{"models":["a","b"],"messages":[]}`, ""},
		{"/chat/completions", `{"model":"","models":["a"],"messages":[]}`, ""},
		{"/chat/completions", `{"model":"m","messages":[],"max_tokens":null,"max_completion_tokens":5,"stream":false}`, ""},
		{"/chat/completions", `{"model":"m","messages":[],"max_tokens":2.0}`, ""},
		{"/chat/completions", ``, "model: required string"},
		{"/chat/completions", `{}`, "model: required string"},
		{"/chat/completions", `{"model":""}`, "model: required string"},
		{"/chat/completions", `{"model":null,"messages":[]}`, "model: expected a string"},
		{"/chat/completions", `{"model":5,"messages":[]}`, "model: expected a string"},
		{"/chat/completions", `{"models":"a","messages":[]}`, "model: required string"},
		{"/chat/completions", `{"model":"m"}`, "messages: expected an array of messages"},
		{"/chat/completions", `{"model":"m","messages":"hi"}`, "messages: expected an array of messages"},
		{"/chat/completions", `{"model":"m","messages":{}}`, "messages: expected an array of messages"},
		{"/chat/completions", `{"model":"m","messages":[],"stream":"true"}`, "stream: expected a boolean"},
		{"/chat/completions", `{"model":"m","messages":[],"stream":1}`, "stream: expected a boolean"},
		{"/chat/completions", `{"model":"m","messages":[],"max_tokens":0}`, "max_tokens: expected a positive integer"},
		{"/chat/completions", `{"model":"m","messages":[],"max_tokens":-3}`, "max_tokens: expected a positive integer"},
		{"/chat/completions", `{"model":"m","messages":[],"max_tokens":1.5}`, "max_tokens: expected a positive integer"},
		{"/chat/completions", `{"model":"m","messages":[],"max_tokens":"10"}`, "max_tokens: expected a positive integer"},
		{"/chat/completions", `{"model":"m","messages":[],"max_completion_tokens":0}`, "max_completion_tokens: expected a positive integer"},
		{"/chat/completions", `{"model":"m","messages":[],"max_tokens":true}`, "max_tokens: expected a positive integer"},
		// Parsed exactly from the text: gjson's Int saturates the first.
		{"/chat/completions", `{"model":"m","messages":[],"max_tokens":9223372036854775808}`, "max_tokens: expected a positive integer"},
		{"/chat/completions", `{"model":"m","messages":[],"max_tokens":1e300}`, "max_tokens: expected a positive integer"},
		{"/chat/completions", `{"model":"m","messages":[],"max_completion_tokens":9223372036854775807.5}`, "max_completion_tokens: expected a positive integer"},
		{"/chat/completions", `{"model":"m","messages":[],"max_tokens":-0}`, "max_tokens: expected a positive integer"},
		{"/chat/completions", `{"model":"m","messages":[],"max_tokens":9223372036854775807}`, ""},
		{"/chat/completions", `{"model":"m","messages":[],"max_tokens":1e3}`, ""},
		{"/responses", `{"model":"m","input":"x","max_output_tokens":18446744073709551616}`, "max_output_tokens: expected a positive integer"},
		// the first wrong field is reported
		{"/chat/completions", `{"model":1,"stream":"x","max_tokens":0}`, "model: expected a string"},
		{"/chat/completions", `{"model":"m","stream":"x","max_tokens":0}`, "stream: expected a boolean"},
		{"/chat/completions", `[]`, "Request body must be a JSON object"},
		{"/chat/completions", `null`, "Request body must be a JSON object"},
		{"/chat/completions", `{"model":"m",}`, "Request body is not valid JSON"},
		{"/chat/completions", `{"model":"m"}x`, "Request body is not valid JSON"},

		{"/responses", `{"model":"m","input":"hi"}`, ""},
		{"/responses", `{"model":"m","input":[{"role":"user","content":"hi"}]}`, ""},
		{"/responses", `{"model":"m"}`, ""},
		{"/responses", `{"model":"m","input":5}`, "input: expected a string or an array of input items"},
		{"/responses", `{"model":"m","input":{"role":"user"}}`, "input: expected a string or an array of input items"},
		{"/responses", `{"model":"m","input":null}`, "input: expected a string or an array of input items"},
		{"/responses", `{"model":"m","input":"x","max_output_tokens":0}`, "max_output_tokens: expected a positive integer"},
		{"/responses", `{"input":"x"}`, "model: required string"},

		// routes without their own input check still need a model
		{"/completions", `{"model":"m","prompt":"x"}`, ""},
		{"/completions", `{"prompt":"x"}`, "model: required string"},
		{"/embeddings", `{"model":"m","input":5}`, ""},
		{"/embeddings", `{"input":"x"}`, "model: required string"},
		{"/messages", `{"model":"m","messages":[],"max_tokens":0}`, "max_tokens: expected a positive integer"},
		{"/messages", `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":1024}`, ""},
		{"/messages", `{"model":"m","max_tokens":1024}`, "messages: expected an array of messages"},
		{"/messages", `{"model":"m","messages":"hi","max_tokens":1024}`, "messages: expected an array of messages"},
		{"/messages", `{"model":"m","messages":[]}`, "max_tokens: required (a positive integer)"},
		{"/messages", `{"model":"m","messages":[],"max_tokens":null}`, "max_tokens: required (a positive integer)"},

		// session_id, on every inference route: a string of at most 256
		// characters.
		{"/chat/completions", `{"model":"m","messages":[],"session_id":"` + strings.Repeat("é", 256) + `"}`, ""},
		{"/chat/completions", `{"model":"m","messages":[],"session_id":"` + strings.Repeat("a", 257) + `"}`, "session_id: expected at most 256 characters"},
		{"/chat/completions", `{"model":"m","messages":[],"session_id":5}`, "session_id: expected a string"},
		{"/chat/completions", `{"model":"m","messages":[],"session_id":null}`, "session_id: expected a string"},
		{"/responses", `{"model":"m","input":"x","session_id":{"id":"a"}}`, "session_id: expected a string"},
		{"/messages", `{"model":"m","messages":[],"max_tokens":1,"session_id":["a"]}`, "session_id: expected a string"},
		{"/completions", `{"model":"m","prompt":"x","session_id":"` + strings.Repeat("a", 257) + `"}`, "session_id: expected at most 256 characters"},
		{"/completions", `{"model":"m","prompt":"x","session_id":"s-1"}`, ""},
		{"/chat/completions", `{"model":"m","messages":[],"session_id":"a\u0000b"}`, "session_id: control characters are not allowed"},
	}
	for _, tt := range tests {
		api, _ := admin.ClassifyRoute(admin.APIPrefix + tt.sub)
		_, got := routing.ValidateInference(api.Dialect(), []byte(tt.body))
		switch {
		case tt.want == "" && got != nil:
			t.Errorf("%s %s: unexpected error %v", tt.sub, tt.body, got)
		case tt.want != "" && got == nil:
			t.Errorf("%s %s: no error, want %q", tt.sub, tt.body, tt.want)
		case tt.want != "" && (got.Status != http.StatusBadRequest || got.Message != tt.want):
			t.Errorf("%s %s: error %d %q, want 400 %q", tt.sub, tt.body, got.Status, got.Message, tt.want)
		}
	}
}

// routerOnly is a Router, provisioned, in front of the recording upstream.
func routerOnly(t *testing.T, rt *routing.Router) *chain {
	t.Helper()
	if err := rt.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	return &chain{router: rt}
}

func (c *chain) doRouter(t *testing.T, r *http.Request, repl *caddy.Replacer) testgw.Response {
	t.Helper()
	c.got = nil
	return testgw.Serve(t, handlerOf(routerMW{c.router}, c.upstream(t)), r, repl)
}

func TestRouterDefaults(t *testing.T) {
	rt := new(routing.Router)
	if err := rt.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	if rt.MaxBodyBytes != 16<<20 {
		t.Errorf("defaults = %d", rt.MaxBodyBytes)
	}
	rt = &routing.Router{MaxBodyBytes: 10}
	if err := rt.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	if rt.MaxBodyBytes != 10 {
		t.Errorf("set = %d", rt.MaxBodyBytes)
	}
}

// routerWithCatalog is a Router, provisioned over a gateway whose catalog is
// cat, in front of the recording upstream.
func routerWithCatalog(t *testing.T, rt *routing.Router, cat *catalog.Catalog) *chain {
	t.Helper()
	gw := testgw.New(t)
	gw.ModelCatalog = cat
	rt.Gateway = gw
	if err := rt.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	return &chain{gw: gw, router: rt}
}

func TestRouterForwardsBody(t *testing.T) {
	// odd spacing, escapes and non-ASCII must arrive untouched; only the
	// model becomes the provider's id
	body := "{\n  \"model\" : \"m\",\t\"messages\":[{\"role\":\"user\",\"content\":\"h\\u00e9llo \\\"x\\\" 日本\"}] ,\"extra\":{\"k\":[1,2.50,null]}\n}\n"
	want := strings.Replace(body, `"model" : "m"`, `"model" : "`+testgw.UpstreamModel+`"`, 1)
	tests := []struct {
		name     string
		provider string // the provider's base path
		target   string
		uri      string
	}{
		{"chat", "/v1", "/api/v1/chat/completions", "/v1/chat/completions"},
		{"trailing slash", "/v1", "/api/v1/chat/completions/", "/v1/chat/completions"},
		{"query kept", "/v1", "/api/v1/chat/completions?a=1&b=x%20y&a=2", "/v1/chat/completions?a=1&b=x%20y&a=2"},
		{"custom base", "/openai/v1", "/api/v1/chat/completions?x=1", "/openai/v1/chat/completions?x=1"},
		{"root base", "", "/api/v1/chat/completions", "/chat/completions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := routerWithCatalog(t, &routing.Router{}, testgw.Catalog(tt.provider))
			r, repl := testgw.NewRequest("POST", tt.target, body,
				"Accept-Encoding", "gzip, br", "Incremental", "?1", "Content-Type", "application/json", "Content-Length", "3")
			r.ContentLength = -1 // as for a chunked request
			client := r.Header   // the map Caddy's access log reads
			c.doRouter(t, r, repl).Must(t, http.StatusTeapot)
			if client.Get("Authorization") != "" || client.Get("Accept-Encoding") != "gzip, br" || client.Get("Content-Length") != "3" {
				t.Errorf("the client's header map was changed: %v", client)
			}
			got := c.got
			if got == nil {
				t.Fatal("upstream not reached")
			}
			if string(got.body) != want {
				t.Errorf("body = %q\nwant %q", got.body, want)
			}
			if got.contentLength != int64(len(want)) {
				t.Errorf("ContentLength = %d, want %d", got.contentLength, len(want))
			}
			if cl := got.header.Get("Content-Length"); cl != strconv.Itoa(len(want)) {
				t.Errorf("Content-Length header = %q, want %d", cl, len(want))
			}
			if _, ok := got.header["Accept-Encoding"]; ok {
				t.Errorf("Accept-Encoding = %q, want removed", got.header.Get("Accept-Encoding"))
			}
			if _, ok := got.header["Incremental"]; ok {
				t.Error("Incremental reached the provider: reverse_proxy refuses to buffer such a request")
			}
			if ct := got.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			if auth := got.header.Get("Authorization"); auth != "Bearer "+testgw.UpstreamKey {
				t.Errorf("Authorization = %q, want the provider's key", auth)
			}
			if got.host != testgw.UpstreamHost {
				t.Errorf("Host = %q, want %q", got.host, testgw.UpstreamHost)
			}
			if got.route == nil || got.route.Model.ID != "m" || got.route.Provider.Name != testgw.UpstreamName || got.route.Kind != "chat" {
				t.Errorf("route = %+v", got.route)
			}
			for name, want := range map[string]string{
				"tollgate.upstream.uri": tt.uri, "tollgate.upstream.dial": testgw.UpstreamHost, "tollgate.upstream.host": testgw.UpstreamHost,
				"tollgate.upstream.scheme": "http", "tollgate.model": "m", "tollgate.provider": testgw.UpstreamName,
			} {
				if v, _ := repl.Get(name); v != want {
					t.Errorf("%s = %v, want %q", name, v, want)
				}
			}
		})
	}
}

// Nothing but an inference POST reaches a provider: the router answers
// the other requests of its routes itself.
func TestRouterAnswersWhatIsNotInference(t *testing.T) {
	for _, tc := range []struct {
		method, target string
		status         int
		message        string
	}{
		{"GET", "/api/v1/models/openai/gpt-4o/endpoints", 404, "Model not found: openai/gpt-4o"},
		{"GET", "/api/v1/chat/completions", 405, "Method GET is not allowed on /api/v1/chat/completions"},
		{"DELETE", "/api/v1/responses/resp_1", 404, "Not found: DELETE /api/v1/responses/resp_1"},
		{"GET", "/api/v1/responses/resp_1", 404, "Not found: GET /api/v1/responses/resp_1"},
		{"POST", "/api/v1/providers", 404, "Not found: POST /api/v1/providers"},
		{"POST", "/api/v1/models", 404, "Not found: POST /api/v1/models"},
		{"HEAD", "/api/v1/messages/", 405, "Method HEAD is not allowed on /api/v1/messages/"},
		{"GET", "/api/v1/chat/completions/x", 404, "Not found: GET /api/v1/chat/completions/x"},
		{"GET", "/api/v1/messages/count_tokens", 404, "Not found: GET /api/v1/messages/count_tokens"},
		{"GET", "/api/v1/models/openai/gpt-4o/endpoints/x", 404, "Not found: GET /api/v1/models/openai/gpt-4o/endpoints/x"},
		{"GET", "/api/v1/models/openai", 404, "Not found: GET /api/v1/models/openai"},
		// The model list takes GET only; nothing below it reaches a provider.
		{"POST", "/api/v1/models/user", 404, "Not found: POST /api/v1/models/user"},
		{"POST", "/api/v1/models/user/x", 404, "Not found: POST /api/v1/models/user/x"},
	} {
		c := routerWithCatalog(t, new(routing.Router), testgw.Catalog("/v1"))
		r, repl := testgw.NewRequest(tc.method, tc.target, "")
		c.doRouter(t, r, repl).WantError(t, tc.status, tc.message)
		if c.got != nil {
			t.Errorf("%s %s reached the upstream", tc.method, tc.target)
		}
		if v, ok := repl.Get("tollgate.upstream.uri"); ok {
			t.Errorf("%s %s: tollgate.upstream.uri = %v", tc.method, tc.target, v)
		}
	}
}

func TestRouterPassesUntouched(t *testing.T) {
	tests := []struct {
		name   string
		method string
		target string
		body   string
		uri    any // nil when the placeholder must stay unset
	}{
		{"GET generation, answered by the admin", "GET", "/api/v1/generation?id=gen-1", "", nil},
		{"management route", "POST", "/api/v1/keys", `not json`, nil},
		{"current key", "GET", "/api/v1/key", "", nil},
		{"unknown api route", "POST", "/api/v1/unknown", "x", nil},
		{"outside the api", "POST", "/v1/chat/completions", "x", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := routerWithCatalog(t, new(routing.Router), testgw.Catalog("/v1"))
			r, repl := testgw.NewRequest(tt.method, tt.target, tt.body, "Accept-Encoding", "gzip")
			c.doRouter(t, r, repl).Must(t, http.StatusTeapot)
			got := c.got
			if got == nil {
				t.Fatal("upstream not reached")
			}
			if string(got.body) != tt.body {
				t.Errorf("body = %q", got.body)
			}
			if ae := got.header.Get("Accept-Encoding"); ae != "gzip" {
				t.Errorf("Accept-Encoding = %q, want kept", ae)
			}
			if auth := got.header.Get("Authorization"); auth != "" || got.route != nil {
				t.Errorf("unrouted request got Authorization %q, route %+v", auth, got.route)
			}
			v, ok := repl.Get("tollgate.upstream.uri")
			if tt.uri == nil && ok || tt.uri != nil && v != tt.uri {
				t.Errorf("tollgate.upstream.uri = %v (set %v), want %v", v, ok, tt.uri)
			}
			if v, ok := repl.Get("tollgate.upstream.dial"); ok {
				t.Errorf("tollgate.upstream.dial = %v on an unrouted request", v)
			}
		})
	}
}

func TestRouterAnswersModels(t *testing.T) {
	cat := testgw.Catalog("/v1")
	want := `{"data":[` + string(cat.Models()[0].Public) + `],"total_count":1,"links":{"next":null}}` + "\n"
	for _, target := range []string{"/api/v1/models?supported_parameters=temperature", "/api/v1/models/", "/api/v1/models/user"} {
		t.Run(target, func(t *testing.T) {
			c := routerWithCatalog(t, new(routing.Router), cat)
			r, repl := testgw.NewRequest("GET", target, "", "Accept-Encoding", "gzip")
			res := c.doRouter(t, r, repl).Must(t, http.StatusOK)
			if res.Body != want {
				t.Errorf("body = %s\nwant %s", res.Body, want)
			}
			if ct := res.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			if res.JSON.Get("data.0.id").Str != "m" || res.JSON.Get("data.0.pricing.completion").Str != "0.000002" {
				t.Errorf("model = %s", res.JSON.Get("data.0").Raw)
			}
			if c.got != nil {
				t.Error("the model list reached the upstream")
			}
			if v, ok := repl.Get("tollgate.upstream.uri"); ok {
				t.Errorf("tollgate.upstream.uri = %v, want unset", v)
			}
		})
	}
}

func TestRouterRefuses(t *testing.T) {
	valid := `{"model":"m","messages":[]}`
	tests := []struct {
		name    string
		max     int64
		target  string
		body    string
		status  int
		message string
	}{
		{"bad field", 0, "/api/v1/chat/completions", `{"model":"m","messages":[],"max_tokens":0}`, 400, "max_tokens: expected a positive integer"},
		{"not json", 0, "/api/v1/responses", `{`, 400, "Request body is not valid JSON"},
		{"public route POST is not routed", 0, "/api/v1/models", `[]`, 404, "Not found: POST /api/v1/models"},
		{"unknown model", 0, "/api/v1/chat/completions", `{"model":"x","messages":[]}`, 400, `model: unknown model "x"`},
		{"one byte over", int64(len(valid)) - 1, "/api/v1/chat/completions", valid, 413, "Request body is larger than " + strconv.Itoa(len(valid)-1) + " bytes"},
		{"far over", 64, "/api/v1/chat/completions", `{"model":"m","messages":[],"x":"` + strings.Repeat("a", 1000) + `"}`, 413, "Request body is larger than 64 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := routerWithCatalog(t, &routing.Router{MaxBodyBytes: tt.max}, testgw.Catalog("/v1"))
			r, repl := testgw.NewRequest("POST", tt.target, tt.body)
			c.doRouter(t, r, repl).WantError(t, tt.status, tt.message)
			if c.got != nil {
				t.Error("refused request reached the upstream")
			}
		})
	}

	// exactly at the limit passes (the limit is on the client's body, not
	// on the body with the provider's model id)
	c := routerWithCatalog(t, &routing.Router{MaxBodyBytes: int64(len(valid))}, testgw.Catalog("/v1"))
	r, repl := testgw.NewRequest("POST", "/api/v1/chat/completions", valid)
	c.doRouter(t, r, repl).Must(t, http.StatusTeapot)
	if c.got == nil || string(c.got.body) != `{"model":"`+testgw.UpstreamModel+`","messages":[]}` {
		t.Errorf("body at the limit not forwarded: %+v", c.got)
	}
}

func TestRouterInChain(t *testing.T) {
	f := newAuthFixture(t)
	// a refused key never has its body read or checked
	res := f.c.do(t, "POST", "/api/v1/chat/completions", "", `{`)
	res.WantError(t, 401, msgMissingAuth)

	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	res = f.c.do(t, "POST", "/api/v1/chat/completions?debug=1", f.regular, body, "Accept-Encoding", "gzip")
	res.Must(t, http.StatusTeapot)
	got := f.c.got
	// the client's key is replaced by the provider's
	wantBody := `{"model":"` + testgw.UpstreamModel + `","messages":[{"role":"user","content":"hi"}]}`
	if string(got.body) != wantBody || got.header.Get("Authorization") != "Bearer "+testgw.UpstreamKey || got.header.Get("Accept-Encoding") != "" {
		t.Errorf("upstream got body %q, headers %v", got.body, got.header)
	}
	if got.route == nil || got.route.Model.ID != "m" || got.route.Provider.Model != testgw.UpstreamModel {
		t.Errorf("route = %+v", got.route)
	}
	if v, _ := res.Repl.Get("tollgate.upstream.uri"); v != "/v1/chat/completions?debug=1" {
		t.Errorf("tollgate.upstream.uri = %v", v)
	}
	if got.identity == nil || got.identity.Hash != f.regHash {
		t.Errorf("identity = %+v", got.identity)
	}

	res = f.c.do(t, "POST", "/api/v1/chat/completions", f.regular, `{"messages":[]}`)
	res.WantError(t, 400, "model: required string")
}

// errReader fails every read.
type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

func TestRouterUnreadableBody(t *testing.T) {
	c := routerOnly(t, new(routing.Router))
	r, repl := testgw.NewRequest("POST", "/api/v1/chat/completions", "")
	r.Body = io.NopCloser(errReader{})
	c.doRouter(t, r, repl).WantError(t, 400, "Could not read request body")
}
