package sticky

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/storage/affinity"
)

func run(names ...string) []upstream.Attempt {
	out := make([]upstream.Attempt, len(names))
	for i, n := range names {
		out[i].Provider = &catalog.Provider{Name: n}
	}
	return out
}

func names(run []upstream.Attempt) []string {
	var out []string
	for _, a := range run {
		out = append(out, a.Provider.Name)
	}
	return out
}

func TestChoiceSticksToTheServedEndpoint(t *testing.T) {
	table := affinity.NewMemory(0)
	key := affinity.Key{1}
	ctx := context.Background()

	// First turn: nothing known; b serves it.
	var c Choice
	r := run("a", "b", "c")
	c.Stick(ctx, table, key, time.Minute, "m", r)
	if got := names(r); got[0] != "a" || c.Endpoint() != "" {
		t.Fatalf("a miss reordered the run: %v (stuck %q)", got, c.Endpoint())
	}
	c.Served("m", "b")

	// Next turn: b leads, the others keep their order.
	c = Choice{}
	r = run("c", "a", "b")
	c.Stick(ctx, table, key, time.Minute, "m", r)
	if got := names(r); got[0] != "b" || got[1] != "c" || got[2] != "a" || c.Endpoint() != "b" {
		t.Fatalf("run = %v, stuck %q; want b first, then c, a", got, c.Endpoint())
	}

	// b failed and the fallback c served: the conversation moves to c.
	c.Served("m", "c")
	c = Choice{}
	r = run("a", "b", "c")
	c.Stick(ctx, table, key, time.Minute, "m", r)
	if names(r)[0] != "c" {
		t.Fatalf("after a fallback, run = %v; want c first", names(r))
	}

	// c no longer eligible (not in the run): load balancing decides, and
	// the endpoint that serves takes over.
	c = Choice{}
	r = run("a", "b")
	c.Stick(ctx, table, key, time.Minute, "m", r)
	if names(r)[0] != "a" || c.Endpoint() != "" {
		t.Fatalf("an ineligible endpoint led: %v", names(r))
	}
	c.Served("m", "a")
	if got, _ := table.Get(ctx, key, time.Minute); got != "a" {
		t.Fatalf("table names %q, want a", got)
	}

	// A fallback model's endpoint that served is not the model's.
	c = Choice{}
	c.Stick(ctx, table, key, time.Minute, "m", run("a", "b"))
	c.Served("m-fallback", "b")
	if got, _ := table.Get(ctx, key, time.Minute); got != "a" {
		t.Fatalf("after a fallback model served, table names %q, want a", got)
	}
}

func TestChoiceNotStickyRecordsNothing(t *testing.T) {
	var c Choice
	c.Served("m", "a") // no table: not sticky
}
