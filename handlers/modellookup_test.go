package handlers

import (
	"net/http"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

func TestModelGet(t *testing.T) {
	up := testgw.UpstreamProvider("/v1")
	cat := catalog.New([]*catalog.Model{
		testgw.Model("acme/big-1", 0, up),
		testgw.Model("acme/big-2", 0, up),
		testgw.Model("acme/big-2:free", 0, up),
		testgw.Model("acme/bare", 0),
	})
	rt := newRoutingRouter(t, cat)
	for _, tt := range []struct{ path, id string }{
		{"/api/v1/model/acme/big-1", "acme/big-1"},
		{"/api/v1/model/acme/big-1/", "acme/big-1"},
		{"/api/v1/model/acme/big-2:free", "acme/big-2:free"},
		{"/api/v1/model/acme/big-1:nitro", "acme/big-1"},
		{"/api/v1/model/acme/big-2:free:online", "acme/big-2:free"},
		{"/api/v1/model/acme/big-1:online:floor", "acme/big-1"},
		{"/api/v1/model/~acme/big-latest:online", "acme/big-2"},
		{"/api/v1/model/~acme/big-latest", "acme/big-2"},
		{"/api/v1/model/%7Eacme/big-latest", "acme/big-2"},
	} {
		r, repl := testgw.NewRequest("GET", tt.path, "")
		res := testgw.Serve(t, handlerOf(routerMW{rt}, nil), r, repl).Must(t, http.StatusOK)
		m, _ := cat.Lookup(tt.id)
		if res.Body != `{"data":`+string(m.Public)+"}\n" {
			t.Errorf("%s: %s", tt.path, res.Body)
		}
		if ct := res.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", tt.path, ct)
		}
		checkSDKModel(t, res.JSON.Get("data"))
	}
	for _, path := range []string{"/api/v1/model/acme/none", "/api/v1/model/~acme/small-latest", "/api/v1/model/acme/big-1:free",
		"/api/v1/model/acme/big-1:thinking", "/api/v1/model/acme/none:online"} {
		r, repl := testgw.NewRequest("GET", path, "")
		testgw.Serve(t, handlerOf(routerMW{rt}, nil), r, repl).WantError(t, 404, "Model not found: "+path[len("/api/v1/model/"):])
	}
	for _, path := range []string{"/api/v1/model/acme", "/api/v1/model/a/b/c"} {
		r, repl := testgw.NewRequest("GET", path, "")
		testgw.Serve(t, handlerOf(routerMW{rt}, nil), r, repl).WantError(t, 404, "Not found: GET "+path)
	}
}

// An organization that filters its catalog sees only its models, one by
// one as in the list.
func TestModelGetFiltered(t *testing.T) {
	f := newAuthFixture(t)
	f.c.gw.ModelCatalog = catalog.New([]*catalog.Model{
		testgw.Model("a/usable", 0, testgw.UpstreamProvider("/v1")),
		testgw.Model("a/bare", 0), // no usable provider
	})
	f.c.router.Gateway = f.c.gw
	if _, err := f.c.gw.Storage.UpdateAccount(f.acct.ID, func(a *storage.Account) error { a.FilteredModelCatalog = true; return nil }); err != nil {
		t.Fatal(err)
	}
	f.c.do(t, "GET", "/api/v1/model/a/bare", f.regular, "").WantError(t, 404, "Model not found: a/bare")
	if res := f.c.do(t, "GET", "/api/v1/model/a/usable", f.regular, "").Must(t, http.StatusOK); res.JSON.Get("data.id").Str != "a/usable" {
		t.Errorf("usable model = %s", res.Body)
	}
	// The public catalog, without a key or with a management key.
	for _, key := range []string{"", f.mgmt} {
		if res := f.c.do(t, "GET", "/api/v1/model/a/bare", key, "").Must(t, http.StatusOK); res.JSON.Get("data.id").Str != "a/bare" {
			t.Errorf("key %q: %s", key, res.Body)
		}
	}
	if f.c.got != nil {
		t.Error("a model lookup reached the upstream")
	}
}

func TestZDREndpoints(t *testing.T) {
	zdr := func(name string) *catalog.Provider {
		p := testgw.Provider(name, "https", name+".test", name+".test:443", "/v1", "up", "k")
		p.DataPolicy.ZDR = true
		p.Quantization = "fp8"
		return p
	}
	priced := zdr("own-price")
	priced.Pricing = &billing.Pricing{Prompt: testgw.Price("0.000003")}
	cat := catalog.New([]*catalog.Model{
		testgw.Model("a/one", testgw.Price("0.000001"), testgw.Provider("keeps", "https", "k.test", "k.test:443", "", "up", "k"), zdr("zero")),
		testgw.Model("a/two", 0, priced),
		testgw.Model("a/three", 0),
	})
	rt := newRoutingRouter(t, cat)
	r, repl := testgw.NewRequest("GET", "/api/v1/endpoints/zdr", "")
	res := testgw.Serve(t, handlerOf(routerMW{rt}, nil), r, repl).Must(t, http.StatusOK)
	data := res.JSON.Get("data").Array()
	if len(data) != 2 {
		t.Fatalf("zdr endpoints = %s", res.Body)
	}
	for i, want := range []struct{ model, provider, prompt string }{{"a/one", "zero", "0.000001"}, {"a/two", "own-price", "0.000003"}} {
		e := data[i]
		if e.Get("model_id").Str != want.model || e.Get("provider_name").Str != want.provider || e.Get("tag").Str != want.provider ||
			e.Get("name").Str != want.provider+": "+want.model || e.Get("pricing.prompt").Str != want.prompt || e.Get("quantization").Str != "fp8" {
			t.Errorf("data[%d] = %s", i, e.Raw)
		}
		for _, field := range []string{"name", "model_id", "model_name", "context_length", "pricing", "provider_name", "tag", "quantization",
			"max_completion_tokens", "max_prompt_tokens", "supported_parameters", "uptime_last_30m", "uptime_last_5m", "uptime_last_1d",
			"supports_implicit_caching", "latency_last_30m", "throughput_last_30m"} {
			if !e.Get(field).Exists() {
				t.Errorf("data[%d] has no %s", i, field)
			}
		}
	}

	// None: an empty list.
	rt = newRoutingRouter(t, testgw.Catalog("/v1"))
	r, repl = testgw.NewRequest("GET", "/api/v1/endpoints/zdr", "")
	if res := testgw.Serve(t, handlerOf(routerMW{rt}, nil), r, repl).Must(t, http.StatusOK); res.JSON.Get("data").Raw != "[]" {
		t.Errorf("no zdr endpoint: %s", res.Body)
	}
	r, repl = testgw.NewRequest("POST", "/api/v1/endpoints/zdr", "{}")
	testgw.Serve(t, handlerOf(routerMW{rt}, nil), r, repl).WantError(t, 404, "Not found: POST /api/v1/endpoints/zdr")
}
