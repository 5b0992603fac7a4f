package kernel_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// A record one replica creates on first use is written only where the
// database has none: it never overwrites another replica's record under
// the same key, changed meanwhile, and the writer is told (on the feed)
// to read that record back.
func TestIfAbsentKeepsAnotherReplicasRecord(t *testing.T) {
	srv := redistest.Start(t)
	open := func() *kernel.RedisBackend {
		b, err := kernel.OpenRedis(kernel.RedisOptions{Address: srv.Addr, KeyPrefix: "ia:"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	a, b := open(), open()
	const key = "eu/acct/mallory"
	if err := a.Commit([]kernel.Write{{Key: key, Value: map[string]any{"active": false}}}); err != nil {
		t.Fatal(err)
	}
	from, err := b.Position()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Commit([]kernel.Write{{Key: key, Value: map[string]any{"active": true}, IfAbsent: true},
		{Key: "eu/acct/new", Value: map[string]any{"active": true}, IfAbsent: true}}); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	if v := c.Get(context.Background(), "ia:{tg}"+key).Val(); v != `{"active":false}` {
		t.Fatalf("the first replica's record became %s", v)
	}
	if v := c.Get(context.Background(), "ia:{tg}eu/acct/new").Val(); v != `{"active":true}` {
		t.Fatalf("an absent record was not created: %q", v)
	}

	// b's own commit is not given back to it; the record it did not
	// write is.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var got []string
	b.Follow(ctx, from, kernel.FeedHandler{
		Apply: func(changes []kernel.Change) error {
			for _, ch := range changes {
				got = append(got, ch.Keys...)
			}
			if len(got) > 0 {
				cancel()
			}
			return nil
		},
		Resync: func() error { return nil },
	})
	if !slices.Equal(got, []string{key}) {
		t.Fatalf("read back %q, want only %q", got, key)
	}
}
