package dashboard

import (
	"errors"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// A read of the stored generations that fails is tried again, so that
// the activity page's recent list gets them once the database answers;
// after seedTries failures it gives up with an error in the log.
func TestRecentSeedRetries(t *testing.T) {
	st, err := storage.Open(storage.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var waits []time.Duration
	oldRead, oldSleep := storedGenerations, sleep
	t.Cleanup(func() { storedGenerations, sleep = oldRead, oldSleep })
	sleep = func(d time.Duration) { waits = append(waits, d) }
	fails := 2
	storedGenerations = func(_ *storage.Store, fn func(storage.Generation) bool) error {
		if fails > 0 {
			fails--
			return errors.New("database unreachable")
		}
		fn(storage.Generation{ID: "gen-1", AccountID: "acct", CreatedAt: time.Unix(1, 0)})
		return nil
	}
	core, logs := observer.New(zap.WarnLevel)
	x := &recentIndex{acc: map[string][]recentGen{}}
	x.seed(st, zap.New(core))
	if got := x.list("acct", 10, func(*recentGen) bool { return true }); len(got) != 1 || got[0].ID != "gen-1" {
		t.Fatalf("after two failures: %v", got)
	}
	if len(waits) != 2 || waits[1] != 2*waits[0] || logs.FilterLevelExact(zap.WarnLevel).Len() != 2 {
		t.Fatalf("waits %v, logs %v", waits, logs.All())
	}

	fails, waits = 100, nil
	core, logs = observer.New(zap.WarnLevel)
	x.seed(st, zap.New(core))
	if len(waits) != seedTries-1 || logs.FilterLevelExact(zap.ErrorLevel).Len() != 1 {
		t.Fatalf("giving up: waits %v, logs %v", waits, logs.All())
	}
}
