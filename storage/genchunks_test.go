package storage

import (
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

func TestGenerationSlot(t *testing.T) {
	id := NewGenerationID(time.UnixMilli(1795482078335))
	if slot, ok := record.GenerationSlot(prefixGeneration + id); !ok || slot != "179548207833" {
		t.Errorf("slot of %s = %q, %v; want its creation's 10 ms", id, slot, ok)
	}
	for _, key := range []string{prefixGeneration + "gen-17954820783", prefixGeneration + "gen-17954820783x5-ab", prefixGeneration + "other", prefixUpstreamID + id} {
		if slot, ok := record.GenerationSlot(key); ok {
			t.Errorf("%q has slot %q, want none", key, slot)
		}
	}
}

// TestGenerationsOnDiskAfterTheUpgrade: a database holding generation
// records one entry each (written before chunks) and chunked ones (written
// since) answers lookups of both and lists each once, also after a
// restart.
func TestGenerationsOnDiskAfterTheUpgrade(t *testing.T) {
	dir := t.TempDir()
	old := Generation{ID: NewGenerationID(time.UnixMilli(1795000000000)), AccountID: "acct-old", Cost: money.Amount(7), Status: "completed", CreatedAt: time.UnixMilli(1795000000000).UTC()}
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	v, _ := old.MarshalJSON()
	if err := db.Update(func(txn *badger.Txn) error { return txn.Set([]byte(prefixGeneration+old.ID), v) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openTemp(t, dir)
	a, _ := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	var ids []string
	for i := range 30 {
		res, err := s.Reserve(a.ID, "", Holds{Hold: 10})
		if err != nil {
			t.Fatal(err)
		}
		g := &Generation{ID: NewGenerationID(time.Now().Add(time.Duration(i) * 3 * time.Millisecond)), AccountID: a.ID, Cost: 1, Status: "completed", CreatedAt: time.Now().UTC()}
		if err := s.Settle(res, Charge{Cost: 1, Generation: g}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, g.ID)
	}
	check := func(when string) {
		t.Helper()
		for _, id := range ids {
			if g, err := s.AccountGeneration(a.ID, id); err != nil || g.ID != id {
				t.Fatalf("%s: generation %s: %+v %v", when, id, g, err)
			}
		}
		if g, err := s.Generation(old.ID); err != nil || g.Cost != 7 {
			t.Fatalf("%s: the record written before chunks: %+v %v", when, g, err)
		}
		seen := map[string]int{}
		if err := s.Generations(func(g Generation) bool { seen[g.ID]++; return true }); err != nil {
			t.Fatal(err)
		}
		if len(seen) != len(ids)+1 {
			t.Fatalf("%s: listed %d generations, want %d", when, len(seen), len(ids)+1)
		}
		for id, n := range seen {
			if n != 1 {
				t.Fatalf("%s: %s listed %d times", when, id, n)
			}
		}
	}
	check("before the checkpoint") // from the journal
	check("after the checkpoint")  // Generations' scan checkpointed: from the chunks
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTemp(t, dir)
	defer s.Close()
	check("after a restart")
	if got, _ := totals(s, a.ID); got.Requests != int64(len(ids)) || got.Usage != money.Amount(len(ids)) {
		t.Fatalf("the rollup rebuilt from the chunks: %+v", got)
	}
}
