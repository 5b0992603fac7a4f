package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/storage/backends"
	// The built-in backends, registered in tollgate.storage.
	_ "github.com/tollgate-dev/caddy-tollgate/storage/backends/badger"
	_ "github.com/tollgate-dev/caddy-tollgate/storage/backends/redis"
)

// parseStorage parses `storage <backend> { ... }` with the backend
// module's own UnmarshalCaddyfile, into the module's JSON.
func parseStorage(d *caddyfile.Dispenser) (json.RawMessage, error) {
	if !d.NextArg() {
		return nil, d.Errf("storage: expected a backend (%s)", strings.Join(storageBackends(), " or "))
	}
	name := d.Val()
	if _, err := caddy.GetModule(backends.Namespace + "." + name); err != nil {
		return nil, d.Errf("storage: unknown backend %q (expected %s)", name, strings.Join(storageBackends(), " or "))
	}
	mod, err := caddyfile.UnmarshalModule(d, backends.Namespace+"."+name)
	if err != nil {
		return nil, err
	}
	var warnings []caddyconfig.Warning
	raw := caddyconfig.JSONModuleObject(mod, "backend", name, &warnings)
	if len(warnings) > 0 {
		return nil, fmt.Errorf("storage %s: %s", name, warnings[0].Message)
	}
	return raw, nil
}

// storageBackends are the registered backends' names.
func storageBackends() []string {
	var names []string
	for _, m := range caddy.GetModules(backends.Namespace) {
		names = append(names, m.ID.Name())
	}
	slices.Sort(names)
	return names
}

// storageRaw is the backend's config: StorageRaw, read in its older form
// {"redis": {...}} as {"backend": "redis", ...}; unset (or {}): the
// embedded database with the app's data_dir, sync_writes and gc_interval,
// which also fill a badger backend's unset options.
func (a *App) storageRaw() (json.RawMessage, error) {
	cfg := map[string]json.RawMessage{}
	if a.StorageRaw != nil {
		if err := json.Unmarshal(a.StorageRaw, &cfg); err != nil {
			return nil, fmt.Errorf("storage: %v", err)
		}
	}
	if old, ok := cfg["redis"]; ok && cfg["backend"] == nil {
		if len(cfg) > 1 {
			return nil, errors.New("storage: redis: set alone (the older form), or as \"backend\": \"redis\"")
		}
		fields := map[string]json.RawMessage{}
		if err := json.Unmarshal(old, &fields); err != nil {
			return nil, fmt.Errorf("storage: redis: %v", err)
		}
		cfg = fields
		cfg["backend"] = json.RawMessage(`"redis"`)
		return json.Marshal(cfg)
	}
	if cfg["backend"] == nil {
		cfg["backend"] = json.RawMessage(`"badger"`)
	}
	if string(cfg["backend"]) == `"badger"` {
		for name, v := range map[string]any{"dir": a.DataDir, "sync_writes": a.SyncWrites, "gc_interval": a.GCInterval} {
			if _, set := cfg[name]; set || v == "" || v == false || v == caddy.Duration(0) {
				continue
			}
			b, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			cfg[name] = b
		}
	}
	return json.Marshal(cfg)
}

// loadStorage loads the backend module with ctx, from StorageRaw or the
// older fields.
func (a *App) loadStorage(ctx caddy.Context) error {
	raw, err := a.storageRaw()
	if err != nil {
		return err
	}
	a.StorageRaw = raw
	mod, err := ctx.LoadModule(a, "StorageRaw")
	if err != nil {
		return storageError(err)
	}
	b, ok := mod.(backends.Module)
	if !ok {
		return fmt.Errorf("storage: module %T is not a storage backend", mod)
	}
	a.backend = b
	return nil
}

// storageError is a backend's provision or validation error as the app
// reported it before backends were modules: "storage: <backend>: ...".
func storageError(err error) error {
	msg := err.Error()
	for _, name := range storageBackends() {
		if i := strings.Index(msg, "storage: "+name+": "); i >= 0 {
			return errors.New(msg[i:])
		}
	}
	return err
}

// warnBesideRedis warns, at start, of the embedded database's options set
// beside `storage redis`, which keeps every record in Redis: they do not
// apply, and an operator who set data_dir may believe the data is there.
func (a *App) warnBesideRedis() {
	if a.logger == nil || a.storageBackend() != "redis" {
		return
	}
	for _, o := range []struct {
		name string
		set  bool
	}{{"data_dir", a.DataDir != ""}, {"sync_writes", a.SyncWrites}, {"gc_interval", a.GCInterval != 0}} {
		if o.set {
			a.logger.Warn(o.name+" does not apply with storage redis: every record is in Redis, nothing is written under data_dir",
				zap.String("option", o.name))
		}
	}
}

// storageBackend is the configured backend's name ("" when unreadable:
// loadStorage reports it).
func (a *App) storageBackend() string {
	raw, err := a.storageRaw()
	if err != nil {
		return ""
	}
	var cfg struct{ Backend string }
	_ = json.Unmarshal(raw, &cfg) // storageRaw wrote it
	return cfg.Backend
}
