package handlers

import (
	"context"
	"github.com/tollgate-dev/caddy-tollgate/contentfilter"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/testgw"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// storeDown is a gateway whose store cannot be had.
type storeDown struct{ *testgw.Gateway }

func (storeDown) Store() (*storage.Store, error) { return nil, storage.ErrUnavailable }

// Guardrails that cannot be read refuse the request (503) instead of
// serving it unfiltered; and a management key or anonymous caller has
// none.
func TestContentFiltersFailClosed(t *testing.T) {
	rt := Router{gw: storeDown{testgw.New(t)}}
	st := &requestState{id: &gateway.Identity{Principal: storage.Principal{Hash: "h"}}}
	if _, apiErr := rt.filterBody(context.Background(), st, []byte(`{"model":"m","input":"x"}`)); apiErr == nil || apiErr.Status != http.StatusServiceUnavailable {
		t.Fatalf("store down: %v, want 503", apiErr)
	}
	if _, apiErr := rulesFor(st); apiErr == nil || apiErr.Status != http.StatusServiceUnavailable {
		t.Fatalf("rulesFor with the store down: %v, want 503", apiErr)
	}
	if ms, apiErr := rt.modelsFor(st); ms != nil || apiErr == nil || apiErr.Status != http.StatusServiceUnavailable {
		t.Fatal("models listed with unknown guardrails")
	}
	st.plan = &searchPlan{query: "q"}
	if apiErr := rt.filterSearchQuery(st); apiErr == nil || apiErr.Status != http.StatusServiceUnavailable {
		t.Fatalf("search query with the store down: %v", apiErr)
	}
	mgmt := &requestState{id: &gateway.Identity{Principal: storage.Principal{Management: true}}}
	if b, apiErr := rt.filterBody(context.Background(), mgmt, []byte(`{}`)); apiErr != nil || string(b) != `{}` {
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
	rt := Router{gw: gw}
	st := &requestState{id: &gateway.Identity{Principal: storage.Principal{Hash: key.Hash}}, store: gw.Storage}
	if _, apiErr := rt.filterBody(context.Background(), st, []byte(`{"input":"x"}`)); apiErr == nil || apiErr.Status != http.StatusForbidden {
		t.Fatalf("block: %v", apiErr)
	}
	if b, apiErr := rt.filterBody(context.Background(), st, []byte(`{"input":"y"}`)); apiErr != nil || string(b) != `{"input":"y"}` {
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
	rt := Router{gw: gw}
	st := &requestState{id: &gateway.Identity{Principal: storage.Principal{Hash: key.Hash}}, store: gw.Storage}
	long := []byte(`{"input":"` + strings.Repeat("abcdefghij", contentfilter.ScanBudget/10/20) + `"}`)
	start := time.Now()
	_, apiErr := rt.filterBody(context.Background(), st, long)
	if apiErr == nil || apiErr.Status != http.StatusRequestEntityTooLarge || !strings.HasPrefix(apiErr.Message, "content_filters: ") {
		t.Fatalf("long: %v", apiErr)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("refused after %v", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, apiErr := rt.filterBody(ctx, st, []byte(`{"input":"y"}`)); apiErr == nil || apiErr.Status != 499 {
		t.Fatalf("gone: %v", apiErr)
	}
}
