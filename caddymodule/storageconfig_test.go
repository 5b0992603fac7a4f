package caddymodule

import (
	"encoding/json"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// The embedded database's options beside storage redis are named in a
// warning at start; without storage redis, or without them, none.
func TestWarnsOfBadgerOptionsBesideRedis(t *testing.T) {
	redis := json.RawMessage(`{"redis": {"address": "127.0.0.1:6379"}}`)
	for i, tc := range []struct {
		app  func() *App
		want []string
	}{
		{func() *App { return &App{DataDir: "/var/lib/tollgate", StorageRaw: redis} }, []string{"data_dir"}},
		{func() *App {
			return &App{DataDir: "d", SyncWrites: true, GCInterval: caddy.Duration(1), StorageRaw: redis}
		}, []string{"data_dir", "sync_writes", "gc_interval"}},
		{func() *App { return &App{StorageRaw: redis} }, nil},
		{func() *App { return &App{DataDir: "/var/lib/tollgate", SyncWrites: true} }, nil},
	} {
		core, logs := observer.New(zap.WarnLevel)
		a := tc.app()
		a.logger = zap.New(core)
		a.warnBesideRedis()
		var got []string
		for _, e := range logs.All() {
			got = append(got, e.ContextMap()["option"].(string))
		}
		if len(got) != len(tc.want) {
			t.Fatalf("case %d: warned of %v, want %v", i, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Fatalf("case %d: warned of %v, want %v", i, got, tc.want)
			}
		}
	}
}
