package handlers

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// fieldKind is a JSON type as the SDK's zod schemas state it.
type fieldKind int

const (
	kString fieldKind = iota
	kInt
	kBool
	kObject
	kStrings // array of strings
)

// schemaField is one field of @openrouter/sdk's Model$inboundSchema
// (esm/models/model.js and the schemas it imports).
type schemaField struct {
	path     string
	kind     fieldKind
	nullable bool
	optional bool
}

// sdkModelSchema: every field of the SDK's Model schema, required ones first.
var sdkModelSchema = []schemaField{
	{path: "id", kind: kString},
	{path: "canonical_slug", kind: kString},
	{path: "name", kind: kString},
	{path: "created", kind: kInt},
	{path: "context_length", kind: kInt, nullable: true},
	{path: "architecture", kind: kObject},
	{path: "architecture.input_modalities", kind: kStrings},
	{path: "architecture.output_modalities", kind: kStrings},
	{path: "architecture.modality", kind: kString, nullable: true},
	{path: "pricing", kind: kObject},
	{path: "pricing.prompt", kind: kString},
	{path: "pricing.completion", kind: kString},
	{path: "top_provider", kind: kObject},
	{path: "top_provider.is_moderated", kind: kBool},
	{path: "per_request_limits", kind: kObject, nullable: true},
	{path: "supported_parameters", kind: kStrings},
	{path: "supported_voices", kind: kStrings, nullable: true},
	{path: "default_parameters", kind: kObject, nullable: true},
	{path: "links", kind: kObject},
	{path: "links.details", kind: kString},
	{path: "description", kind: kString, optional: true},
	{path: "architecture.tokenizer", kind: kString, optional: true},
	{path: "architecture.instruct_type", kind: kString, nullable: true, optional: true},
	{path: "pricing.request", kind: kString, optional: true},
	{path: "pricing.web_search", kind: kString, optional: true},
	{path: "top_provider.context_length", kind: kInt, nullable: true, optional: true},
	{path: "top_provider.max_completion_tokens", kind: kInt, nullable: true, optional: true},
	{path: "expiration_date", kind: kString, nullable: true, optional: true},
	{path: "knowledge_cutoff", kind: kString, nullable: true, optional: true},
	{path: "hugging_face_id", kind: kString, nullable: true, optional: true},
}

// checkSDKModel fails the test for each field of m that the SDK would
// refuse.
func checkSDKModel(t *testing.T, m gjson.Result) {
	t.Helper()
	for _, f := range sdkModelSchema {
		v := m.Get(f.path)
		switch {
		case !v.Exists():
			if !f.optional {
				t.Errorf("model %s: %s missing", m.Get("id").Raw, f.path)
			}
		case v.Type == gjson.Null:
			if !f.nullable {
				t.Errorf("model %s: %s is null", m.Get("id").Raw, f.path)
			}
		case !f.kind.matches(v):
			t.Errorf("model %s: %s = %s has the wrong type", m.Get("id").Raw, f.path, v.Raw)
		}
	}
}

func (k fieldKind) matches(v gjson.Result) bool {
	switch k {
	case kString:
		return v.Type == gjson.String
	case kInt:
		return v.Type == gjson.Number && v.Float() == float64(v.Int())
	case kBool:
		return v.IsBool()
	case kObject:
		return v.IsObject()
	case kStrings:
		if !v.IsArray() {
			return false
		}
		for _, e := range v.Array() {
			if e.Type != gjson.String {
				return false
			}
		}
		return true
	}
	return false
}

// manyModels is a catalog of n models m00, m01, ...; every third one has
// no usable provider.
func manyModels(n int) *catalog.Catalog {
	var models []*catalog.Model
	for i := range n {
		var providers []*catalog.Provider
		if i%3 != 2 {
			providers = append(providers, testgw.Provider("mock", "http", "127.0.0.1:8081", "127.0.0.1:8081", "/v1", "mock", "k"))
		}
		models = append(models, testgw.Model(fmt.Sprintf("m%02d", i), 0, providers...))
	}
	return catalog.New(models)
}

func ids(res testgw.Response) string {
	var out []string
	for _, m := range res.JSON.Get("data").Array() {
		out = append(out, m.Get("id").Str)
	}
	return strings.Join(out, ",")
}

func TestModelsList(t *testing.T) {
	cat := testgw.RoutedCatalog()
	rt := newRoutingRouter(t, cat)
	r, repl := testgw.NewRequest("GET", "/api/v1/models", "")
	res := testgw.Serve(t, handlerOf(routerMW{rt}, nil), r, repl).Must(t, 200)
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	if got := res.Header.Get("Content-Length"); got != fmt.Sprint(len(res.Body)) {
		t.Errorf("Content-Length = %s, body %d bytes", got, len(res.Body))
	}
	if ids(res) != "paid,mock,keyless,bare,second" || res.JSON.Get("total_count").Raw != "5" ||
		res.JSON.Get("links.next").Type != gjson.Null || !res.JSON.Get("links").IsObject() {
		t.Fatalf("list = %s", res.Body)
	}
	for i, m := range res.JSON.Get("data").Array() {
		if m.Raw != string(cat.Models()[i].Public) {
			t.Errorf("data[%d] = %s, want the public object verbatim", i, m.Raw)
		}
		checkSDKModel(t, m)
	}
	if strings.Contains(res.Body, "sk-openai") || strings.Contains(res.Body, "api.openai.test") {
		t.Errorf("provider details leaked: %s", res.Body)
	}

	// The shape of the models a models_file can bring: public fields of
	// the real API beyond the minimum.
	rich := testgw.Model("rich", 0)
	rich.Public = []byte(`{"id":"openai/gpt-4","canonical_slug":"openai/gpt-4","hugging_face_id":"","name":"GPT-4","created":1692901234,"description":"d","context_length":8192,"architecture":{"modality":"text->text","input_modalities":["text"],"output_modalities":["text"],"tokenizer":"GPT","instruct_type":"chatml"},"pricing":{"prompt":"0.00003","completion":"0.00006","image":"0","request":"0"},"top_provider":{"context_length":8192,"max_completion_tokens":4096,"is_moderated":true},"per_request_limits":null,"supported_parameters":["temperature"],"default_parameters":{"temperature":null},"supported_voices":null,"knowledge_cutoff":null,"expiration_date":null,"links":{"details":"/api/v1/models/openai/gpt-4/endpoints"}}`)
	rt = newRoutingRouter(t, catalog.New([]*catalog.Model{rich}))
	r, repl = testgw.NewRequest("GET", "/api/v1/models", "")
	res = testgw.Serve(t, handlerOf(routerMW{rt}, nil), r, repl).Must(t, 200)
	checkSDKModel(t, res.JSON.Get("data.0"))

	// an empty catalog is an empty list, not null
	r, repl = testgw.NewRequest("GET", "/api/v1/models", "")
	res = testgw.Serve(t, handlerOf(routerMW{newRoutingRouter(t, catalog.New(nil))}, nil), r, repl).Must(t, 200)
	if res.Body != `{"data":[],"total_count":0,"links":{"next":null}}`+"\n" {
		t.Errorf("empty list = %s", res.Body)
	}
}

func TestModelsPaging(t *testing.T) {
	rt := newRoutingRouter(t, manyModels(12))
	tests := []struct {
		query string
		ids   string
		next  string // "" for null
	}{
		{"", "m00,m01,m02,m03,m04,m05,m06,m07,m08,m09,m10,m11", ""},
		{"?limit=5", "m00,m01,m02,m03,m04", "/api/v1/models?offset=5&limit=5"},
		{"?offset=5&limit=5", "m05,m06,m07,m08,m09", "/api/v1/models?offset=10&limit=5"},
		{"?offset=10&limit=5", "m10,m11", ""},
		{"?offset=7&limit=5", "m07,m08,m09,m10,m11", ""},
		{"?offset=12&limit=5", "", ""},
		{"?offset=100", "", ""},
		{"?offset=3", "m03,m04,m05,m06,m07,m08,m09,m10,m11", ""}, // limit 500
		{"?offset=0&limit=1000", "m00,m01,m02,m03,m04,m05,m06,m07,m08,m09,m10,m11", ""},
		{"?offset=&limit=", "m00,m01,m02,m03,m04,m05,m06,m07,m08,m09,m10,m11", ""},
		{"?limit=1&supported_parameters=temperature", "m00", "/api/v1/models?offset=1&limit=1&supported_parameters=temperature"},
	}
	for _, tt := range tests {
		r, repl := testgw.NewRequest("GET", "/api/v1/models"+tt.query, "")
		res := testgw.Serve(t, handlerOf(routerMW{rt}, nil), r, repl).Must(t, 200)
		next := res.JSON.Get("links.next")
		if ids(res) != tt.ids || res.JSON.Get("total_count").Int() != 12 || next.Str != tt.next ||
			tt.next == "" && next.Type != gjson.Null || !res.JSON.Get("data").IsArray() {
			t.Errorf("%q: ids %q total %s next %s", tt.query, ids(res), res.JSON.Get("total_count").Raw, next.Raw)
		}
	}

	for _, tt := range []struct{ query, message string }{
		{"?limit=0", "limit: expected an integer from 1 to 1000"},
		{"?limit=1001", "limit: expected an integer from 1 to 1000"},
		{"?limit=-1", "limit: expected an integer from 1 to 1000"},
		{"?limit=ten", "limit: expected an integer from 1 to 1000"},
		{"?limit=2.0", "limit: expected an integer from 1 to 1000"},
		{"?offset=-1", "offset: expected a non-negative integer"},
		{"?offset=x&limit=0", "offset: expected a non-negative integer"},
		{"?offset=null", "offset: expected a non-negative integer"},
	} {
		r, repl := testgw.NewRequest("GET", "/api/v1/models"+tt.query, "")
		testgw.Serve(t, handlerOf(routerMW{rt}, nil), r, repl).WantError(t, 400, tt.message)
	}
}

func TestModelsUser(t *testing.T) {
	f := newAuthFixture(t)
	f.c.gw.ModelCatalog = manyModels(7)
	f.c.router.Gateway = f.c.gw

	res := f.c.do(t, "GET", "/api/v1/models/user", f.regular, "").Must(t, 200)
	if ids(res) != "m00,m01,m03,m04,m06" || res.JSON.Get("total_count").Int() != 5 || res.JSON.Get("links.next").Type != gjson.Null {
		t.Errorf("user list = %s", res.Body)
	}
	for _, m := range res.JSON.Get("data").Array() {
		checkSDKModel(t, m)
	}
	res = f.c.do(t, "GET", "/api/v1/models/user?offset=0&limit=2", f.regular, "").Must(t, 200)
	if ids(res) != "m00,m01" || res.JSON.Get("links.next").Str != "/api/v1/models/user?offset=2&limit=2" {
		t.Errorf("user page = %s", res.Body)
	}
	res = f.c.do(t, "GET", "/api/v1/models/user?offset=4&limit=2", f.regular, "").Must(t, 200)
	if ids(res) != "m06" || res.JSON.Get("links.next").Type != gjson.Null {
		t.Errorf("last user page = %s", res.Body)
	}
	f.c.do(t, "GET", "/api/v1/models/user?limit=0", f.regular, "").WantError(t, 400, "limit: expected an integer from 1 to 1000")

	// Auth guards it: a regular key only.
	f.c.do(t, "GET", "/api/v1/models/user", "", "").WantError(t, 401, msgMissingAuth)
	f.c.do(t, "GET", "/api/v1/models/user", f.mgmt, "").WantError(t, 403, msgNoInference)
	if f.c.got != nil {
		t.Error("the model list reached the upstream")
	}

	// The public list: with or without a key, the whole catalog...
	for _, key := range []string{"", f.regular, f.mgmt} {
		if res := f.c.do(t, "GET", "/api/v1/models", key, "").Must(t, 200); res.JSON.Get("total_count").Int() != 7 {
			t.Errorf("key %q: public list = %s", key, res.Body)
		}
	}
	// ...unless the organization filters it for its API keys.
	if _, err := f.c.gw.Storage.UpdateAccount(f.acct.ID, func(a *storage.Account) error { a.FilteredModelCatalog = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if res := f.c.do(t, "GET", "/api/v1/models", f.regular, "").Must(t, 200); ids(res) != "m00,m01,m03,m04,m06" {
		t.Errorf("filtered public list = %s", res.Body)
	}
	for _, key := range []string{"", f.mgmt} {
		if res := f.c.do(t, "GET", "/api/v1/models", key, "").Must(t, 200); res.JSON.Get("total_count").Int() != 7 {
			t.Errorf("key %q: filtered org, public list = %s", key, res.Body)
		}
	}
}

func TestModelsHead(t *testing.T) {
	rt := newRoutingRouter(t, manyModels(2))
	r, repl := testgw.NewRequest("HEAD", "/api/v1/models", "")
	res := testgw.Serve(t, handlerOf(routerMW{rt}, nil), r, repl)
	if res.Status != http.StatusOK {
		t.Errorf("HEAD status %d", res.Status)
	}
}

// The list's filters narrow total_count, and the next page's link keeps
// them; the count takes output_modalities.
func TestModelsFiltered(t *testing.T) {
	rt := newRoutingRouter(t, manyModels(12))
	r, repl := testgw.NewRequest("GET", "/api/v1/models?q=m1&limit=1&sort=newest", "")
	res := testgw.Serve(t, handlerOf(routerMW{rt}, nil), r, repl).Must(t, 200)
	if ids(res) != "m10" || res.JSON.Get("total_count").Int() != 2 || res.JSON.Get("links.next").Str != "/api/v1/models?offset=1&limit=1&q=m1&sort=newest" {
		t.Errorf("filtered page = %s", res.Body)
	}
	r, repl = testgw.NewRequest("GET", "/api/v1/models?sort=most-popular", "")
	testgw.Serve(t, handlerOf(routerMW{rt}, nil), r, repl).WantError(t, 400, `sort: "most-popular": the gateway does not rank models by popularity`)

	for query, want := range map[string]int64{"": 12, "?output_modalities=text": 12, "?output_modalities=image": 0, "?output_modalities=all": 12} {
		r, repl := testgw.NewRequest("GET", "/api/v1/models/count"+query, "")
		if res := testgw.Serve(t, handlerOf(routerMW{rt}, nil), r, repl).Must(t, 200); res.JSON.Get("data.count").Int() != want {
			t.Errorf("count%s = %s, want %d", query, res.Body, want)
		}
	}
	r, repl = testgw.NewRequest("GET", "/api/v1/models/count?output_modalities=video", "")
	testgw.Serve(t, handlerOf(routerMW{rt}, nil), r, repl).WantError(t, 400, `output_modalities: unknown modality "video" (expected text, image, audio, embeddings)`)
}

// GET /embeddings/models is the models whose output is embeddings, paged
// as GET /models is, for a regular key.
func TestEmbeddingsModels(t *testing.T) {
	f := newAuthFixture(t)
	cat := manyModels(5)
	for _, m := range cat.Models() {
		if m.ID == "m01" || m.ID == "m03" || m.ID == "m04" {
			m.Public, _ = sjson.SetRawBytes(m.Public, "architecture.output_modalities", []byte(`["embeddings"]`))
		}
	}
	f.c.gw.ModelCatalog = cat
	f.c.router.Gateway = f.c.gw
	res := f.c.do(t, "GET", "/api/v1/embeddings/models", f.regular, "").Must(t, 200)
	if ids(res) != "m01,m03,m04" || res.JSON.Get("total_count").Int() != 3 || res.JSON.Get("links.next").Type != gjson.Null {
		t.Errorf("list = %s", res.Body)
	}
	for _, m := range res.JSON.Get("data").Array() {
		checkSDKModel(t, m)
	}
	res = f.c.do(t, "GET", "/api/v1/embeddings/models?limit=2", f.regular, "").Must(t, 200)
	if ids(res) != "m01,m03" || res.JSON.Get("links.next").Str != "/api/v1/embeddings/models?offset=2&limit=2" {
		t.Errorf("page = %s", res.Body)
	}
	f.c.do(t, "GET", "/api/v1/embeddings/models?limit=1001", f.regular, "").WantError(t, 400, "limit: expected an integer from 1 to 1000")
	f.c.do(t, "GET", "/api/v1/embeddings/models", "", "").WantError(t, 401, msgMissingAuth)
	if f.c.got != nil {
		t.Error("the model list reached the upstream")
	}
}
