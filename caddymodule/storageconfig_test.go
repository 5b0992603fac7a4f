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

// The backend's config as the app loads it: the older forms migrated,
// the new one kept.
func TestStorageRawMigratesTheOlderForms(t *testing.T) {
	for i, tc := range []struct {
		app  *App
		want string
	}{
		{&App{}, `{"backend":"badger"}`},
		{&App{DataDir: "/d", SyncWrites: true, GCInterval: caddy.Duration(90e9)}, `{"backend":"badger","dir":"/d","gc_interval":90000000000,"sync_writes":true}`},
		{&App{StorageRaw: json.RawMessage(`{}`), DataDir: "/d"}, `{"backend":"badger","dir":"/d"}`},
		{&App{StorageRaw: json.RawMessage(`{"backend":"badger","dir":"/x"}`), DataDir: "/d"}, `{"backend":"badger","dir":"/x"}`},
		{&App{StorageRaw: json.RawMessage(`{"redis":{"address":"r:6379","db":2}}`)}, `{"address":"r:6379","backend":"redis","db":2}`},
		{&App{StorageRaw: json.RawMessage(`{"backend":"redis","address":"r:6379"}`), DataDir: "/d"}, `{"address":"r:6379","backend":"redis"}`},
	} {
		got, err := tc.app.storageRaw()
		if err != nil || string(got) != tc.want {
			t.Errorf("case %d: %s, %v; want %s", i, got, err, tc.want)
		}
	}
}

// The new form is refused as the older one is, its field named.
func TestStorageModuleValidates(t *testing.T) {
	wantRefused(t, []byte(`{"apps": {"tollgate": {"storage": {"backend": "redis", "address": "localhost:99999"}}}}`), "storage: redis: address: port")
	wantRefused(t, []byte(`{"apps": {"tollgate": {"storage": {"backend": "badger", "gc_interval": -1}}}}`), "gc_interval: must not be negative")
	wantRefused(t, []byte(`{"apps": {"tollgate": {"storage": {"backend": "memcached"}}}}`), "tollgate.storage.memcached")
}
