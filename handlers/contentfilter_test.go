package handlers

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/contentfilter"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/admin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/handlers/routing"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// storeDown is a gateway whose store cannot be had.
type storeDown struct{ *testgw.Gateway }

func (storeDown) Store() (*storage.Store, error) { return nil, storage.ErrUnavailable }

// Guardrails that cannot be read refuse the request (503) instead of
// serving it unfiltered; and a management key or anonymous caller has
// none.
func TestContentFiltersFailClosed(t *testing.T) {
	rt := routing.Router{Gateway: storeDown{testgw.New(t)}}
	st := &pipeline.State{ID: &gateway.Identity{Principal: storage.Principal{Hash: "h"}}}
	if _, apiErr := rt.FilterBody(context.Background(), st, []byte(`{"model":"m","input":"x"}`)); apiErr == nil || apiErr.Status != http.StatusServiceUnavailable {
		t.Fatalf("store down: %v, want 503", apiErr)
	}
	if _, apiErr := routing.RulesFor(st); apiErr == nil || apiErr.Status != http.StatusServiceUnavailable {
		t.Fatalf("rulesFor with the store down: %v, want 503", apiErr)
	}
	if ms, apiErr := rt.ModelsFor(st); ms != nil || apiErr == nil || apiErr.Status != http.StatusServiceUnavailable {
		t.Fatal("models listed with unknown guardrails")
	}
	if _, apiErr := (guardrails{st}).FetchedFilter(); apiErr == nil || apiErr.Status != http.StatusServiceUnavailable {
		t.Fatalf("search query with the store down: %v", apiErr)
	}
	mgmt := &pipeline.State{ID: &gateway.Identity{Principal: storage.Principal{Management: true}}}
	if b, apiErr := rt.FilterBody(context.Background(), mgmt, []byte(`{}`)); apiErr != nil || string(b) != `{}` {
		t.Fatalf("management key: %s %v", b, apiErr)
	}
}

// A key's guardrail filters apply through the cached rules.
func TestContentFiltersFromRules(t *testing.T) {
	gw := testgw.New(t)
	acct := gw.Account(t, storage.AccountOrganization)
	key, _, err := gw.Storage.CreateAPIKey(storage.NewAPIKey{AccountID: acct.ID, Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := gw.Storage.CreateGuardrail(acct.ID, func(g *storage.Guardrail) error {
		g.Name = "G"
		g.ContentFilters = []byte(`[{"pattern":"x","action":"block"}]`)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Storage.AssignKeys(acct.ID, g.ID, []string{key.Hash}, nil); err != nil {
		t.Fatal(err)
	}
	rt := routing.Router{Gateway: gw}
	st := &pipeline.State{ID: &gateway.Identity{Principal: storage.Principal{Hash: key.Hash}}, Store: gw.Storage}
	if _, apiErr := rt.FilterBody(context.Background(), st, []byte(`{"input":"x"}`)); apiErr == nil || apiErr.Status != http.StatusForbidden {
		t.Fatalf("block: %v", apiErr)
	}
	if b, apiErr := rt.FilterBody(context.Background(), st, []byte(`{"input":"y"}`)); apiErr != nil || string(b) != `{"input":"y"}` {
		t.Fatalf("clean: %s %v", b, apiErr)
	}
}

// A text too long for the custom patterns' cost is a 413 naming the
// content filters, before its scan; a client gone stops the scan.
func TestContentFiltersBounded(t *testing.T) {
	gw := testgw.New(t)
	acct := gw.Account(t, storage.AccountOrganization)
	key, _, err := gw.Storage.CreateAPIKey(storage.NewAPIKey{AccountID: acct.ID, Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := gw.Storage.CreateGuardrail(acct.ID, func(g *storage.Guardrail) error {
		g.Name = "G"
		g.ContentFilters = []byte(`[{"pattern":"[a-z]{1,30}x","action":"block"}]`)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Storage.AssignKeys(acct.ID, g.ID, []string{key.Hash}, nil); err != nil {
		t.Fatal(err)
	}
	rt := routing.Router{Gateway: gw}
	st := &pipeline.State{ID: &gateway.Identity{Principal: storage.Principal{Hash: key.Hash}}, Store: gw.Storage}
	long := []byte(`{"input":"` + strings.Repeat("abcdefghij", contentfilter.ScanBudget/10/20) + `"}`)
	start := time.Now()
	_, apiErr := rt.FilterBody(context.Background(), st, long)
	if apiErr == nil || apiErr.Status != http.StatusRequestEntityTooLarge || !strings.HasPrefix(apiErr.Message, "content_filters: ") {
		t.Fatalf("long: %v", apiErr)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("refused after %v", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, apiErr := rt.FilterBody(ctx, st, []byte(`{"input":"y"}`)); apiErr == nil || apiErr.Status != 499 {
		t.Fatalf("gone: %v", apiErr)
	}
}

// Each inference route reads its own API's places of text; a path below
// one (sent as it is) reads every API's.
func TestFilterAPIPerRoute(t *testing.T) {
	for path, want := range map[string]contentfilter.API{
		"/api/v1/chat/completions":  contentfilter.Chat,
		"/api/v1/completions":       contentfilter.Completions,
		"/api/v1/responses":         contentfilter.Responses,
		"/api/v1/messages":          contentfilter.Messages,
		"/api/v1/embeddings":        contentfilter.Embeddings,
		"/api/v1/embeddings/custom": contentfilter.AnyAPI,
	} {
		api, ok := admin.ClassifyRoute(path)
		if !ok {
			t.Fatalf("%s: not a route", path)
		}
		if got := routing.FilterAPI(&pipeline.State{API: api}); got != want {
			t.Errorf("%s: %d, want %d", path, got, want)
		}
	}
}

// A Messages document with a text source (which the gateway turns into a
// text part) is filtered on the Messages route; an identifier a redaction
// matches refuses the request.
func TestFilterBodyMessagesDocument(t *testing.T) {
	gw := testgw.New(t)
	acct := gw.Account(t, storage.AccountOrganization)
	key, _, err := gw.Storage.CreateAPIKey(storage.NewAPIKey{AccountID: acct.ID, Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := gw.Storage.CreateGuardrail(acct.ID, func(g *storage.Guardrail) error {
		g.Name = "G"
		g.ContentFilters = []byte(`[{"pattern":"PROJ-[0-9]{4}","action":"block"},{"pattern":"secret_[a-z]+","action":"redact"}]`)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Storage.AssignKeys(acct.ID, g.ID, []string{key.Hash}, nil); err != nil {
		t.Fatal(err)
	}
	api, _ := admin.ClassifyRoute("/api/v1/messages")
	rt := routing.Router{Gateway: gw}
	st := &pipeline.State{ID: &gateway.Identity{Principal: storage.Principal{Hash: key.Hash}}, Store: gw.Storage, API: api}
	doc := `{"model":"m","messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"see PR\u00adOJ-1234"}}]}]}`
	if _, apiErr := rt.FilterBody(context.Background(), st, []byte(doc)); apiErr == nil || apiErr.Status != http.StatusForbidden {
		t.Fatalf("document: %v", apiErr)
	}
	tool := `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"name":"secret_tool","input_schema":{"type":"object"}}]}`
	if _, apiErr := rt.FilterBody(context.Background(), st, []byte(tool)); apiErr == nil || apiErr.Status != http.StatusForbidden {
		t.Fatalf("redacted tool name: %v", apiErr)
	}
	desc := `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"name":"t","description":"uses secret_sauce","input_schema":{"type":"object"}}]}`
	if b, apiErr := rt.FilterBody(context.Background(), st, []byte(desc)); apiErr != nil || !strings.Contains(string(b), `"description":"uses [REDACTED]"`) {
		t.Fatalf("description: %s %v", b, apiErr)
	}
}

// Fetched text too long for the custom patterns' scan budget is blocked,
// not passed on unscanned.
func TestFetchedTextBeyondTheScanBudgetIsBlocked(t *testing.T) {
	gw := testgw.New(t)
	acct := gw.Account(t, storage.AccountOrganization)
	key, _, err := gw.Storage.CreateAPIKey(storage.NewAPIKey{AccountID: acct.ID, Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := gw.Storage.CreateGuardrail(acct.ID, func(g *storage.Guardrail) error {
		g.Name = "G"
		g.ContentFilters = []byte(`[{"pattern":"[a-z]{1,30}x","action":"block"}]`)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Storage.AssignKeys(acct.ID, g.ID, []string{key.Hash}, nil); err != nil {
		t.Fatal(err)
	}
	st := &pipeline.State{ID: &gateway.Identity{Principal: storage.Principal{Hash: key.Hash}}, Store: gw.Storage}
	f, apiErr := newFetchedFilter(st)
	if apiErr != nil || f == nil {
		t.Fatalf("filter %v %v", f, apiErr)
	}
	short, long := "plain words", strings.Repeat("abcdefghij", contentfilter.ScanBudget/10/20)
	if h := f.Filter(&short); h != nil {
		t.Fatalf("short text blocked: %+v", h)
	}
	if h := f.Filter(&long); h == nil || h.Action != contentfilter.Block {
		t.Fatalf("text beyond the budget: %+v", h)
	}
}
