package storage

import (
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// Each domain store drops the records another replica deleted (its kinds'
// Remove), and a workspace's changed record keeps the usage in memory.
func TestSharedDeletionsReachTheOtherReplica(t *testing.T) {
	srv := redistest.Start(t)
	a, b := openSharedReplica(t, srv, "rm:"), openSharedReplica(t, srv, "rm:")
	sealer := testSealer(t, 3)
	f := populate(t, a, sealer, "x")
	eventually(t, 5*time.Second, "every record reaches B", func() bool { return knowsAll(b, f, true) })

	// A charge on the key counts on its (default) workspace; renaming the
	// workspace at A must not reset B's usage of it.
	key, _ := a.APIKey(f.apiKey)
	hold := money.Amount(money.AmountScale)
	res, err := b.Reserve(f.account, f.apiKey, Holds{Hold: hold})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Settle(res, Charge{Cost: hold}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.UpdateWorkspace(f.account, key.WorkspaceID, func(w *Workspace) error { w.Name = "Renamed"; return nil }); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the rename reaches B with the usage kept", func() bool {
		w, _ := b.Workspace(f.account, key.WorkspaceID)
		return w.Name == "Renamed" && w.Usage.Total == hold
	})

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(a.DeleteManagementKey(f.mgmtKey))
	must(a.DeleteAPIKey(f.apiKey))
	must(a.DeleteGuardrail(f.account, f.guardrail))
	must(a.DeleteBYOK(f.account, f.byok))
	must(a.DeleteDestination(f.account, f.destination))
	must(a.DeletePrivateEndpoint(f.account, f.endpoint))
	must(a.DeleteWorkspace(f.account, f.workspace))
	gone := []string{"management key", "api key", "guardrail", "byok", "destination", "private endpoint", "workspace"}
	eventually(t, 5*time.Second, "the deletions reach B", func() bool {
		k := known(b, f)
		for _, kind := range gone {
			if k[kind] {
				return false
			}
		}
		return true
	})
	k := known(b, f)
	for _, kind := range []string{"account", "purchase", "member", "end user"} {
		if !k[kind] {
			t.Errorf("B lost the %s", kind)
		}
	}
	if w, _ := b.Workspace(f.account, key.WorkspaceID); w.Usage.Total != hold {
		t.Errorf("B's default workspace usage %s after the deletions, want %s", w.Usage.Total, hold)
	}
}
