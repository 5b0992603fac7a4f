package billing

import (
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

func TestAdmitBudget(t *testing.T) {
	for _, tt := range []struct {
		name                    string
		limit, used, held, hold money.Amount
		admit                   bool
	}{
		{"room", 100, 10, 20, 30, true},
		{"exactly full", 100, 10, 20, 70, true},
		{"one over", 100, 10, 20, 71, false},
		{"holds fill it", 100, 0, 100, 1, false},
		{"already spent", 100, 100, 0, 0, false},
		{"overspent by settling", 100, 120, 0, 0, false},
		{"zero budget", 0, 0, 0, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rej := AdmitBudget(tt.hold, Budget{Source: "workspace_budget", Limit: tt.limit, Used: tt.used, Held: tt.held, Message: "m", Hint: "h"})
			if (rej == nil) != tt.admit {
				t.Fatalf("admit %v, want %v", rej == nil, tt.admit)
			}
			if rej != nil && (rej.Source != "workspace_budget" || rej.Message != "m" || rej.RemedyHint != "h") {
				t.Fatalf("rejection %+v", rej)
			}
		})
	}
}
