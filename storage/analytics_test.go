package storage

import (
	"fmt"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// settleGen settles one request of cost with a generation record.
func settleGen(t *testing.T, s *Store, acct, key string, g Generation, cost money.Amount) Generation {
	t.Helper()
	res, err := s.Reserve(acct, key, Holds{Hold: 1})
	if err != nil {
		t.Fatal(err)
	}
	g.ID, g.AccountID, g.KeyHash, g.Cost = NewGenerationID(g.CreatedAt), acct, key, cost
	if err := s.Settle(res, Charge{Cost: cost, BYOK: g.BYOK, Generation: &g}); err != nil {
		t.Fatal(err)
	}
	return g
}

func totals(s *Store, acct string) (sum Sums, cells int) {
	s.ScanUsage(acct, time.Unix(0, 0), time.Now().Add(time.Hour), func(c *Cell) { sum.Add(c.Sums); cells++ })
	return
}

func TestAnalyticsRollupSurvivesReopenWithoutDoubleCounting(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	acct, _ := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	other, _ := s.CreateAccount(NewAccount{Name: "B", Kind: AccountOrganization})
	key, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k"})
	okey, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: other.ID, Name: "k"})
	t0 := time.Now().UTC().Add(-3 * time.Hour).Truncate(time.Hour) // t0 and t0+1m in one hour cell
	g1 := settleGen(t, s, acct.ID, key.Hash, Generation{Model: "m1", Provider: "p", PromptTokens: 3, CompletionTokens: 4, Status: "completed", User: "alice", LatencyMS: 10, CreatedAt: t0}, 1500)
	settleGen(t, s, acct.ID, key.Hash, Generation{Model: "m1", Provider: "p", PromptTokens: 5, CompletionTokens: 6, Status: "completed", User: "alice", LatencyMS: 30, CreatedAt: t0.Add(time.Minute),
		ContentFlags: []ContentFlag{{GuardrailID: "g", Label: "[PHONE]", Builtin: "phone"}, {GuardrailID: "g", Label: "x"}}}, 2500)
	settleGen(t, s, acct.ID, key.Hash, Generation{Model: "m2", Provider: "q", PromptTokens: 1, CompletionTokens: 1, Status: "completed", BYOK: true, CreatedAt: t0.Add(2 * time.Hour)}, 700)
	settleGen(t, s, other.ID, okey.Hash, Generation{Model: "m1", Provider: "p", PromptTokens: 9, CompletionTokens: 9, Status: "completed", User: "alice", CreatedAt: t0}, 9999)
	if _, err := s.AddFeedback(g1, "latency", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddFeedback(g1, "nonsense", nil); err == nil {
		t.Fatal("unknown category accepted")
	}
	// One request flagged (by two filters), counted once, live and rebuilt.
	want := Sums{Requests: 3, PromptTokens: 9, CompletionTokens: 11, Usage: 4000, BYOKUsage: 700, LatencyMS: 40, Feedback: 1, Flagged: 1}
	check := func(s *Store, when string) {
		t.Helper()
		got, cells := totals(s, acct.ID)
		if got != want || cells != 2 {
			t.Fatalf("%s: totals %+v in %d cells, want %+v in 2", when, got, cells, want)
		}
		if u := s.EndUserUsage(acct.ID, "alice"); u.Requests != 2 || u.Usage != 4000 || u.Feedback != 1 {
			t.Fatalf("%s: alice's usage %+v", when, u)
		}
		if vals := s.UsageDimValues(acct.ID, DimModel); len(vals) != 2 || vals[0] != "m1" || vals[1] != "m2" {
			t.Fatalf("%s: models %v", when, vals)
		}
		// End users seen in requests are created on first use, per account.
		if u, ok := s.EndUser(acct.ID, "alice"); !ok || !u.Active {
			t.Fatalf("%s: alice not auto-created: %+v %v", when, u, ok)
		}
		if n := len(s.ListEndUsers(other.ID)); n != 1 {
			t.Fatalf("%s: other account has %d end users, want 1", when, n)
		}
	}
	check(s, "live")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTemp(t, dir)
	defer s.Close()
	check(s, "reopened")
	// Partial time ranges select whole hours.
	var n int64
	s.ScanUsage(acct.ID, t0.Add(time.Hour), time.Now().Add(time.Hour), func(c *Cell) { n += c.Sums.Requests })
	if n != 1 {
		t.Fatalf("from t0+1h: %d requests, want 1", n)
	}
}

func TestEndUsersLifecycle(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	acct, _ := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	name := "Bob"
	if _, err := s.CreateEndUser(acct.ID, "bob", &name); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateEndUser(acct.ID, "bob", nil); err != ErrExists {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := s.CreateEndUser(acct.ID, "", nil); err == nil {
		t.Fatal("empty user accepted")
	}
	if _, err := s.CreateEndUser("acct-missing", "x", nil); err != ErrNotFound {
		t.Fatalf("missing account: %v", err)
	}
	if s.EndUserDeactivated(acct.ID, "bob") || s.EndUserDeactivated(acct.ID, "unknown") {
		t.Fatal("active or unknown user reported deactivated")
	}
	u, err := s.SetEndUserActive(acct.ID, "bob", false)
	if err != nil || u.Active || u.DeactivatedAt == nil {
		t.Fatalf("deactivate: %+v %v", u, err)
	}
	if _, err := s.SetEndUserActive(acct.ID, "nobody", false); err != ErrNotFound {
		t.Fatalf("missing user: %v", err)
	}
	s.Close()
	s = openTemp(t, dir)
	defer s.Close()
	if !s.EndUserDeactivated(acct.ID, "bob") {
		t.Fatal("deactivation lost on reopen")
	}
	u, _ = s.SetEndUserActive(acct.ID, "bob", true)
	if !u.Active || u.DeactivatedAt != nil || *u.Name != "Bob" || s.EndUserDeactivated(acct.ID, "bob") {
		t.Fatalf("reactivate: %+v", u)
	}
}

func TestQueryUsage(t *testing.T) {
	s := openTemp(t, t.TempDir())
	defer s.Close()
	acct, _ := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	m, err := s.CreateMember(NewMember{AccountID: acct.ID, Email: "one@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	creator := m.ID
	k1, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k1", CreatorUserID: &creator})
	k2, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k2"})
	// Sunday 2026-03-01 23:30 and Monday 2026-03-02 00:30 UTC.
	sun := time.Date(2026, 3, 1, 23, 30, 0, 0, time.UTC)
	mon := sun.Add(time.Hour)
	settleGen(t, s, acct.ID, k1.Hash, Generation{Model: "m1", Provider: "p", Status: "completed", User: "alice", CreatedAt: sun}, 100)
	settleGen(t, s, acct.ID, k1.Hash, Generation{Model: "m2", Provider: "p", Status: "completed", CreatedAt: mon}, 200)
	settleGen(t, s, acct.ID, k2.Hash, Generation{Model: "m1", Provider: "q", Status: "completed", BYOK: true, User: "bob", CreatedAt: mon}, 400)
	all := func(q UsageQuery) map[string]money.Amount {
		t.Helper()
		if q.From.IsZero() {
			q.From, q.To = sun.AddDate(0, 0, -1), mon.AddDate(0, 0, 1)
		}
		rows, err := s.QueryUsage(acct.ID, q)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]money.Amount{}
		for _, r := range rows {
			k := r.Bucket.Format("01-02")
			if r.Bucket.IsZero() {
				k = "-"
			}
			for _, d := range r.Dims {
				k += "|" + d
			}
			out[k] += r.Sums.Usage + r.Sums.BYOKUsage
		}
		return out
	}
	for name, tc := range map[string]struct {
		q    UsageQuery
		want map[string]money.Amount
	}{
		"weeks start on Monday": {UsageQuery{Granularity: GranularityWeek}, map[string]money.Amount{"02-23": 100, "03-02": 600}},
		"days":                  {UsageQuery{Granularity: GranularityDay, GroupBy: []string{DimModel}}, map[string]money.Amount{"03-01|m1": 100, "03-02|m2": 200, "03-02|m1": 400}},
		"in":                    {UsageQuery{GroupBy: []string{DimEndUser}, Filters: []UsageFilter{{Dim: DimEndUser, Values: []string{"alice", "zed"}}}}, map[string]money.Amount{"-|alice": 100}},
		"in with unset":         {UsageQuery{GroupBy: []string{DimEndUser}, Filters: []UsageFilter{{Dim: DimEndUser, Values: []string{"alice"}, IncludeUnset: true}}}, map[string]money.Amount{"-|alice": 100, "-|": 200}},
		"not_in":                {UsageQuery{GroupBy: []string{DimEndUser}, Filters: []UsageFilter{{Dim: DimEndUser, Values: []string{"alice"}, Negate: true}}}, map[string]money.Amount{"-|bob": 400}},
		"byok":                  {UsageQuery{GroupBy: []string{DimBYOK}, Filters: []UsageFilter{{Dim: DimBYOK, Values: []string{"false"}}}}, map[string]money.Amount{"-|false": 300}},
		"key creator":           {UsageQuery{GroupBy: []string{DimUser, DimProvider}}, map[string]money.Amount{"-|" + creator + "|p": 300, "-||q": 400}},
		"key creator filter":    {UsageQuery{Filters: []UsageFilter{{Dim: DimUser, Values: []string{creator}}}}, map[string]money.Amount{"-": 300}},
		"unknown value":         {UsageQuery{Filters: []UsageFilter{{Dim: DimModel, Values: []string{"nope"}}}}, map[string]money.Amount{}},
		"whole hours":           {UsageQuery{From: mon.Add(-10 * time.Minute), To: mon.Add(-5 * time.Minute)}, map[string]money.Amount{"-": 600}},
		"range excludes":        {UsageQuery{From: sun.Add(-48 * time.Hour), To: sun.Add(-30 * time.Minute)}, map[string]money.Amount{}},
	} {
		if got := all(tc.q); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
	if _, err := s.QueryUsage(acct.ID, UsageQuery{GroupBy: []string{"country"}}); err == nil {
		t.Error("unknown dimension accepted")
	}
	if rows, _ := s.QueryUsage("nobody", UsageQuery{}); len(rows) != 0 {
		t.Error("rows for an unknown account")
	}
}
