package sharedledger

import (
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

func TestSharedSettlingCostsStaySmall(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_050)
	for _, window := range []time.Duration{10 * time.Second, time.Second, 50 * time.Millisecond} {
		var am acctMoney
		// A cost every 10 ms for a whole window: the field holds at most
		// one entry a step.
		n := int(window / (10 * time.Millisecond))
		for i := range n {
			am.Settling = keepSettling(am.Settling, t0.Add(time.Duration(i)*10*time.Millisecond), window, 1)
		}
		step := max(window/settleSteps, settleMinStep)
		steps := int((window+step-1)/step) + 1
		if len(am.Settling) > steps {
			t.Fatalf("window %s: %d settling entries for one window of costs, want at most %d", window, len(am.Settling), steps)
		}
		var sum money.Amount
		for i, e := range am.Settling {
			sum += e.Amount
			if i > 0 && e.Until <= am.Settling[i-1].Until {
				t.Fatalf("entries out of order: %v", am.Settling)
			}
		}
		if sum != money.Amount(n) {
			t.Fatalf("window %s: settling costs sum to %s, want %d nano-credits", window, sum, n)
		}
		// No cost is released before its window ends.
		last := t0.Add(time.Duration(n-1) * 10 * time.Millisecond)
		lv := fieldLevels{settling: am.Settling}
		if held, _ := lv.inFlight(last.Add(window - time.Millisecond)); held < 1 {
			t.Fatalf("window %s: the last cost was released early: %s held", window, held)
		}
		// And none is held more than a step past it.
		lv = fieldLevels{settling: am.Settling}
		if held, _ := lv.inFlight(last.Add(window + step)); held != 0 {
			t.Fatalf("window %s: %s still held a step after the last window ended", window, held)
		}
	}
}
