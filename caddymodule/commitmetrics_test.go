package caddymodule

import (
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/telemetry"
	"github.com/tollgate-dev/caddy-tollgate/telemetry/telemetrytest"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// Under `storage redis` the group commits are timed and counted as on
// Badger: a write shows in tollgate_commit_duration_seconds.
func TestCommitMetricsUnderRedis(t *testing.T) {
	srv := redistest.Start(t)
	reg := prometheus.NewRegistry()
	if err := telemetry.Register(reg, false); err != nil {
		t.Fatal(err)
	}
	cfg := `{"admin": {"disabled": true}, "apps": {"tollgate": {"storage": {"redis": {"address": "` + srv.Addr + `", "key_prefix": "metrics:"}}}}}`
	if err := caddy.Load([]byte(cfg), true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = caddy.Stop() })
	app, err := caddy.ActiveContext().App(gateway.AppName)
	if err != nil {
		t.Fatal(err)
	}
	st, err := app.(*App).Store()
	if err != nil {
		t.Fatal(err)
	}
	if !st.Shared() {
		t.Fatal("the store does not run on Redis")
	}
	commits := func() float64 {
		v, _ := telemetrytest.Lookup(t, reg, "tollgate_commit_duration_seconds", nil)
		return v
	}
	before := commits()
	if _, err := st.CreateAccount(storage.NewAccount{Name: "A", Kind: storage.AccountOrganization}); err != nil {
		t.Fatal(err)
	}
	if after := commits(); after <= before {
		t.Errorf("tollgate_commit_duration_seconds count = %v after a write, was %v", after, before)
	}
}
