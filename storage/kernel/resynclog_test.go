package kernel

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// A resynchronization retried every 100 ms through an outage logs its
// first failure, then one line per resyncLogEvery with the count.
func TestResyncFailuresAreNotLoggedEachRetry(t *testing.T) {
	core, logs := observer.New(zapcore.ErrorLevel)
	log := zap.New(core)
	var f resyncFailures
	for range 50 {
		f.report(log, errors.New("connection refused"))
	}
	if n := logs.Len(); n != 1 {
		t.Fatalf("%d lines for 50 quick failures, want 1", n)
	}
	f.logged = f.logged.Add(-resyncLogEvery - time.Second)
	f.report(log, errors.New("connection refused"))
	all := logs.All()
	if len(all) != 2 {
		t.Fatalf("%d lines after the interval, want 2", len(all))
	}
	if got := all[1].ContextMap()["failed_attempts"]; got != int64(50) {
		t.Fatalf("second line counts %v failures, want the 50 since the first", got)
	}
}
