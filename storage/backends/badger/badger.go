// Package badger is the embedded storage backend (module
// tollgate.storage.badger, the default): the store's records in a Badger
// database under one directory, which one process writes.
package badger

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/internal/caddyfileopt"
	"github.com/tollgate-dev/caddy-tollgate/internal/suggest"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/storage/backends"
)

func init() {
	caddy.RegisterModule(new(Badger))
}

// DefaultGCInterval is how often the value log is garbage-collected when
// gc_interval is unset.
const DefaultGCInterval = 5 * time.Minute

// Badger is the embedded database. Its fields are also the app's older
// top-level data_dir, sync_writes and gc_interval, which the app gives it
// when no storage is configured.
type Badger struct {
	// Dir is the Badger directory. Default: "tollgate" under Caddy's app
	// data directory.
	Dir string `json:"dir,omitempty"`
	// SyncWrites fsyncs every group commit. Without it an acknowledged
	// change survives a crash of the process (kill -9), the database's log
	// being in the kernel's page cache; with it, a power loss too, at the
	// cost of one fsync per commit (shared by concurrent requests).
	SyncWrites bool `json:"sync_writes,omitempty"`
	// GCInterval is how often Badger's value log is garbage-collected.
	// Default: 5m.
	GCInterval caddy.Duration `json:"gc_interval,omitempty"`

	dir string // Dir expanded and absolute
}

// CaddyModule returns the Caddy module information.
func (*Badger) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  backends.Namespace + ".badger",
		New: func() caddy.Module { return new(Badger) },
	}
}

// Provision expands the directory's placeholders and makes it absolute.
func (b *Badger) Provision(caddy.Context) error {
	dir := b.Dir
	if dir == "" {
		dir = filepath.Join(caddy.AppDataDir(), "tollgate")
	}
	dir, err := filepath.Abs(caddy.NewReplacer().ReplaceAll(dir, ""))
	if err != nil {
		return fmt.Errorf("data_dir: %v", err)
	}
	b.dir = dir
	if b.GCInterval == 0 {
		b.GCInterval = caddy.Duration(DefaultGCInterval)
	}
	return nil
}

// Validate refuses a negative gc_interval.
func (b *Badger) Validate() error {
	if b.GCInterval < 0 {
		return fmt.Errorf("gc_interval: must not be negative, got %v", time.Duration(b.GCInterval))
	}
	return nil
}

// UnmarshalCaddyfile reads
//
//	storage badger {
//		dir <path>
//		sync_writes [on|off]
//		gc_interval <duration>
//	}
func (b *Badger) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the backend's name
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "dir":
			if !d.AllArgs(&b.Dir) {
				return d.ArgErr()
			}
		case "sync_writes":
			on, err := caddyfileopt.Switch(d)
			if err != nil {
				return err
			}
			b.SyncWrites = on
		case "gc_interval":
			dur, err := caddyfileopt.Duration(d)
			if err != nil {
				return err
			}
			b.GCInterval = dur
		default:
			return suggest.UnknownOption(d, "storage badger", []string{"dir", "sync_writes", "gc_interval"})
		}
	}
	return nil
}

// Options are the embedded database's.
func (b *Badger) Options() storage.Options {
	return storage.Options{Dir: b.dir, GCInterval: time.Duration(b.GCInterval), SyncWrites: b.SyncWrites}
}

// Key is the directory: Badger locks it, so one store per directory.
func (b *Badger) Key() string { return b.dir }

// Describe names the directory.
func (b *Badger) Describe() []zap.Field { return []zap.Field{zap.String("dir", b.dir)} }

// Interface guards.
var (
	_ backends.Module       = (*Badger)(nil)
	_ caddy.Provisioner     = (*Badger)(nil)
	_ caddy.Validator       = (*Badger)(nil)
	_ caddyfile.Unmarshaler = (*Badger)(nil)
)
