package dashboard

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// Creating a key answers with a redirect; the page it leads to shows the
// key once: opening it again (a refresh) neither shows the key again nor
// creates another. Another session cannot read it, and the store never
// holds the key in the clear.
func TestNewKeyIsShownOnceAfterARedirect(t *testing.T) {
	d, st := testDashboard(t)
	a, admin, _ := org(t, st)
	c := &client{t: t, d: d}
	c.signIn(st, Principal{AccountID: a.ID, MemberID: admin.ID})
	// (Management keys take the same path: the operator API's route makes
	// them, which the integration tests have.)
	for _, create := range []struct{ path, name, kind string }{
		{"/dashboard/keys", "ci", "API key"},
	} {
		before := len(st.ListAPIKeys(storage.KeyFilter{AccountID: a.ID, IncludeDisabled: true})) + len(st.ManagementKeys(a.ID))
		w := c.do("POST", create.path, c.form("name", create.name, "expires_in", "720h"))
		loc := w.Header().Get("Location")
		if w.Code != http.StatusSeeOther || !strings.HasPrefix(loc, "/dashboard/keys?created=") {
			t.Fatalf("%s: %d %q", create.path, w.Code, loc)
		}
		// The store holds the flash sealed.
		ds := StoreOf(st)
		ds.k.RLock()
		for _, f := range ds.flashes {
			if strings.Contains(string(f.Sealed), "sk-tg-") {
				t.Fatal("a flash holds the key in the clear")
			}
		}
		ds.k.RUnlock()
		// Another session: nothing, and the flash stays for its own.
		other := &client{t: t, d: d}
		other.signIn(st, Principal{AccountID: a.ID, MemberID: admin.ID})
		if body := other.do("GET", loc, nil).Body.String(); strings.Contains(body, "sk-tg-") && strings.Contains(body, "shown only this once") {
			t.Fatal("another session read the new key")
		}
		page := c.do("GET", loc, nil)
		body := page.Body.String()
		if page.Code != http.StatusOK || !strings.Contains(body, "shown only this once") || !strings.Contains(body, create.name) ||
			!strings.Contains(body, "new-key") {
			t.Fatalf("%s: the new key's page: %d", create.path, page.Code)
		}
		// A refresh: the same GET, no key, nothing created.
		again := c.do("GET", loc, nil).Body.String()
		if strings.Contains(again, `id="new-key"`) || !strings.Contains(again, "shown only once") {
			t.Fatalf("%s: a refresh shows the key again", create.path)
		}
		if after := len(st.ListAPIKeys(storage.KeyFilter{AccountID: a.ID, IncludeDisabled: true})) + len(st.ManagementKeys(a.ID)); after != before+1 {
			t.Fatalf("%s: %d keys created", create.path, after-before)
		}
	}
	// A failed creation still answers the form with its error, no redirect.
	if w := c.do("POST", "/dashboard/keys", c.form("name", "ci", "limit", "-1")); w.Code != http.StatusBadRequest {
		t.Fatalf("bad limit: %d", w.Code)
	}
}

// A flash stored at one replica is read once at another, even before the
// other's memory has it; of simultaneous reads at both, one gets it.
func TestSharedReplicasReadAFlashOnce(t *testing.T) {
	srv := redistest.Start(t)
	open := func() *storage.Store {
		st, err := storage.Open(storage.Options{Redis: &kernel.RedisOptions{Address: srv.Addr, KeyPrefix: "flash:"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	a, b := open(), open()
	for round := range 5 {
		id, err := StoreOf(a).putFlash("cookie", flash{Key: "sk-tg-v1-x", Name: "n", Kind: "API key"})
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			// At once at b, whose feed may not have brought it yet.
			f, err := StoreOf(b).takeFlash("cookie", id)
			if err != nil || f.Key != "sk-tg-v1-x" {
				t.Fatalf("read at b: %+v %v", f, err)
			}
			if _, err := StoreOf(a).takeFlash("cookie", id); err != errFlashGone {
				t.Fatalf("read again at a: %v", err)
			}
			continue
		}
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := range 8 {
			ds := StoreOf(a)
			if i%2 == 1 {
				ds = StoreOf(b)
			}
			wg.Go(func() {
				if _, err := ds.takeFlash("cookie", id); err == nil {
					wins.Add(1)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d reads of one flash", round, wins.Load())
		}
	}
	// Expired: gone.
	id, _ := StoreOf(a).putFlash("cookie", flash{Key: "k"})
	now = func() time.Time { return time.Now().Add(flashTTL + time.Second) }
	defer func() { now = time.Now }()
	if _, err := StoreOf(a).takeFlash("cookie", id); err != errFlashGone {
		t.Fatalf("expired flash: %v", err)
	}
}
