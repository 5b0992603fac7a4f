package export

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/egress"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// TestExporterEgressPolicy: the default client refuses a destination on a
// disallowed address, also one stored earlier, and follows the policy of
// the latest SetEgress both ways; a kept-alive connection made under a
// looser policy is not reused after it is tightened.
func TestExporterEgressPolicy(t *testing.T) {
	s, err := storage.Open(storage.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sealer, _ := storage.NewSealer([]byte(strings.Repeat("k", 32)))
	acct, _ := s.CreateAccount(storage.NewAccount{Name: "A", Kind: storage.AccountOrganization})
	key, _, _ := s.CreateAPIKey(storage.NewAPIKey{AccountID: acct.ID, Name: "k"})
	var got atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got.Add(1) }))
	defer srv.Close()
	d := storage.Destination{ID: storage.NewEndpointID(), AccountID: acct.ID, Type: "webhook", Enabled: true, SamplingRate: 1}
	d.SealConfig(sealer, []byte(`{"url":"`+srv.URL+`","method":"POST","secret":"s"}`))
	if _, err := s.CreateDestination(d); err != nil {
		t.Fatal(err)
	}
	e := New(s, Options{BatchSize: 1, MinBackoff: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	e.SetSealer(sealer)
	defer e.Close()
	loopback := egress.New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")})
	seq := 0
	settle := func() {
		t.Helper()
		res, err := s.Reserve(acct.ID, key.Hash, storage.Holds{Hold: 1})
		if err != nil {
			t.Fatal(err)
		}
		seq++
		g := &storage.Generation{ID: "gen-egress-" + itoaInt(seq), AccountID: acct.ID, KeyHash: key.Hash, CreatedAt: time.Now()}
		if err := s.Settle(res, storage.Charge{Cost: 1, Generation: g}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(n int32) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for got.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("destination got %d deliveries, want %d", got.Load(), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	e.SetEgress(loopback)
	settle()
	waitFor(1) // allowed: delivered, and the connection kept alive
	e.SetEgress(nil)
	settle()
	time.Sleep(500 * time.Millisecond) // ~10 retries, all refused
	if n := got.Load(); n != 1 {
		t.Fatalf("delivered %d times under the default policy", n)
	}
	e.SetEgress(loopback)
	waitFor(2) // the retried batch arrives once allowed again
}
