package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// A time-window price override through a real Caddy: a model whose
// override's daily UTC window holds the present is charged the
// override's prices, and one whose window is later in the day the base
// prices, each to the key and the account, exactly as the answer's
// usage.cost says.

// clockAt is the HHMM clock number of the minute of the day m minutes
// from now (wrapping past midnight).
func clockAt(now time.Time, m int) int {
	day := (now.Hour()*60 + now.Minute() + m + 2*24*60) % (24 * 60)
	return day/60*100 + day%60
}

func TestPricingOverrideTimeWindow(t *testing.T) {
	now := time.Now().UTC()
	// Now is in [now-2h, now+2h), not in [now+3h, now+4h); both wrap
	// past midnight as the clock needs.
	model := func(id string, from, to int) string {
		return fmt.Sprintf(`		model %s {
			context_length 8192
			max_completion_tokens 1000
			pricing {
				prompt 0.000003
				completion 0.000015
				override {
					utc_start %d
					utc_end %d
					prompt 0.000006
					completion 0.0000225
				}
			}
			provider anthropic http://%s {
				model claude-mock
				api_key sk-ant-operator
				style anthropic
			}
		}
`, id, clockAt(now, from), clockAt(now, to), mockAddr)
	}
	block := model("window/now", -120, 120) + model("window/later", 180, 240)
	startInProcessWith(t, func(cfg string) string {
		return replaceOnce(t, cfg, "\t\tmodel tollgate-mock:free {\n", block+"\t\tmodel tollgate-mock:free {\n")
	})
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"window"}`)

	for _, tc := range []struct {
		model              string
		prompt, completion int64 // nano-credits a token
	}{
		{"window/now", 6000, 22500},
		{"window/later", 3000, 15000},
	} {
		t.Run(tc.model, func(t *testing.T) {
			before := c.snapshot(key, org.MgmtKey)
			r := c.mustPost("/chat/completions", key, `{"model":"`+tc.model+`","messages":[{"role":"user","content":"what does this cost now"}]}`, nil).expect(t, 200)
			after := c.snapshot(key, org.MgmtKey)
			u := r.JSON.Get("usage")
			if u.Get("prompt_tokens").Int() == 0 || u.Get("completion_tokens").Int() == 0 {
				t.Fatalf("usage %s", u.Raw)
			}
			want := money.Amount(u.Get("prompt_tokens").Int()*tc.prompt + u.Get("completion_tokens").Int()*tc.completion)
			if got := creditAmount(t, u.Get("cost")); got != want {
				t.Errorf("usage.cost %s, want %s", got, want)
			}
			expectCharged(t, before, after, want, tc.model)
		})
	}

	// The endpoints list shows each override with its window.
	p := c.do("GET", c.gateway+"/api/v1/models/window/now/endpoints", key, nil).expect(t, 200).JSON.Get("data.endpoints.0.pricing.overrides.0")
	if p.Get("utc_start").Int() != int64(clockAt(now, -120)) || p.Get("utc_end").Int() != int64(clockAt(now, 120)) || p.Get("prompt").Str != "0.000006" ||
		strings.Contains(p.Raw, "min_prompt_tokens") {
		t.Errorf("endpoint override %s", p.Raw)
	}
}
