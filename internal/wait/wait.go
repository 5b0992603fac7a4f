// Package wait polls a condition in a test, for what another goroutine,
// replica or process makes true a little later.
package wait

import (
	"testing"
	"time"
)

// Eventually waits up to d for cond, failing t with what otherwise, and
// returns how long it took.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return time.Since(start)
}
