package sharedledger

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/levels"
)

func TestSharedFieldEncodersMatchJSON(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	amounts := []money.Amount{0, 1, -1, money.AmountScale, -money.AmountScale, 1_500_000_000, 123_456_789_012, math.MaxInt64, math.MinInt64 + 1}
	amount := func() money.Amount {
		if rnd.IntN(3) == 0 {
			return amounts[rnd.IntN(len(amounts))]
		}
		return money.Amount(rnd.Int64N(1<<50) - 1<<49)
	}
	windowed := func() money.Windowed { return money.Windowed{Period: rnd.Int64N(1<<40) - 5, Value: amount()} }
	counters := func() money.UsageCounters {
		return money.UsageCounters{Total: amount(), Daily: windowed(), Weekly: windowed(), Monthly: windowed()}
	}
	strs := []string{"", "key_0123abcdef", "ws-1", `quote"back\slash`, "<a&b>", "tab\tnl\n", "é ü", "\u2028", "\xff\xfe"}
	same := func(what string, got []byte, v any) {
		t.Helper()
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("%s: encoded %s, json.Marshal %s", what, got, want)
		}
	}
	for i := range 500 {
		am := acctMoney{Usage: amount(), BYOKUsage: amount(), FreeDay: windowed(), FreeMinute: windowed(), Held: amount(), Running: amount()}
		for range rnd.IntN(4) {
			am.Settling = append(am.Settling, settleEntry{Until: rnd.Int64N(1 << 42), Amount: amount()})
		}
		if i%7 == 0 {
			am.Settling = am.Settling[:0] // empty, not nil: omitted alike
		}
		rate := func() levels.Rate {
			var r levels.Rate
			if rnd.IntN(3) == 0 {
				return r
			}
			for _, w := range []*money.Windowed{&r.Minute, &r.Day, &r.Prompt, &r.Completion} {
				if rnd.IntN(2) == 0 {
					*w = windowed()
				}
			}
			if rnd.IntN(2) == 0 {
				r.Running = rnd.Int64N(100)
			}
			return r
		}
		am.Rate = rate()
		same("acctMoney", appendAcct(nil, &am), am)
		sm := scopeMoney{Usage: counters(), BYOKUsage: counters(), Held: amount(), Rate: rate()}
		same("scopeMoney", appendScope(nil, &sm), sm)
		h := holdRecord{Key: strs[rnd.IntN(len(strs))], Workspace: strs[rnd.IntN(len(strs))], Member: strs[rnd.IntN(len(strs))],
			Hold: amount(), KeyOnly: rnd.IntN(2) == 0}
		if rnd.IntN(2) == 0 {
			h.InFlight, h.Credits, h.WSHold = amount(), amount(), amount()
		}
		if rnd.IntN(2) == 0 {
			h.Rate = levels.RatePlaced{On: uint8(rnd.IntN(8)), Minute: rnd.Int64N(1 << 40), Prompt: rnd.Int64N(3), Completion: rnd.Int64N(3)}
		}
		same("holdRecord", appendHold(nil, &h), h)
	}
	same("zero holdRecord", appendHold(nil, &holdRecord{}), holdRecord{})
}
