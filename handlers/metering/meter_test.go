package metering

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// A release that fails (here, of a hold already released) is logged,
// with the generation, for the operator to see holds left to the ledger.
func TestFailedReleaseIsLogged(t *testing.T) {
	gw := testgw.New(t)
	acct := gw.Account(t, storage.AccountPersonal)
	k, _ := gw.APIKey(t, acct, storage.NewAPIKey{})
	core, logs := observer.New(zap.WarnLevel)
	m := New(gw, zap.New(core))
	r, err := gw.Storage.Reserve(acct.ID, k.Hash, storage.Holds{})
	if err != nil {
		t.Fatal(err)
	}
	st := &pipeline.State{Store: gw.Storage, GenID: "gen-test"}
	m.release(st, r)
	if n := logs.Len(); n != 0 {
		t.Fatalf("a release that worked logged %d lines", n)
	}
	m.release(st, r)
	entries := logs.All()
	if len(entries) != 1 || entries[0].ContextMap()["generation"] != "gen-test" || entries[0].ContextMap()["error"] == nil {
		t.Fatalf("logged %v", entries)
	}
}
