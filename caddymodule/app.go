package caddymodule

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/handlers"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

func init() {
	caddy.RegisterModule(new(App))
}

// App is the `tollgate` Caddy app: it owns the embedded database and the
// settings shared by the gateway's handlers.
type App struct {
	// DataDir is the Badger directory. Default: "tollgate" under Caddy's
	// app data directory.
	DataDir string `json:"data_dir,omitempty"`
	// Brand prefixes limit_source values and the web search tool type.
	// Default: "service".
	BrandName string `json:"brand,omitempty"`
	// GCInterval is how often Badger's value log is garbage-collected.
	// Default: 5m.
	GCInterval caddy.Duration `json:"gc_interval,omitempty"`
	// FreeModel sets the request caps on ":free" models.
	FreeModel handlers.FreeModelLimits `json:"free_model,omitempty"`

	logger *zap.Logger

	mu    sync.Mutex
	dir   string // absolute DataDir: the pool key
	store *storage.Store
}

// stores shares one open database per directory across config reloads:
// Badger locks its directory, and a reload provisions the new config before
// the old one is cleaned up.
var stores = caddy.NewUsagePool()

// current is the most recently started app, for the admin API module, which
// Caddy builds with no config and outside any app.
var current atomic.Pointer[App]

// CaddyModule returns the Caddy module information.
func (*App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  handlers.AppName,
		New: func() caddy.Module { return new(App) },
	}
}

// Provision sets defaults. It does not open the database, so that
// `caddy validate` works while a server holds the directory lock.
func (a *App) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger()
	if a.BrandName == "" {
		a.BrandName = "service"
	}
	if a.GCInterval == 0 {
		a.GCInterval = caddy.Duration(5 * time.Minute)
	}
	a.FreeModel = a.FreeModel.WithDefaults()
	dir := a.DataDir
	if dir == "" {
		dir = filepath.Join(caddy.AppDataDir(), "tollgate")
	}
	repl := caddy.NewReplacer()
	dir, err := filepath.Abs(repl.ReplaceAll(dir, ""))
	if err != nil {
		return fmt.Errorf("data_dir: %v", err)
	}
	a.dir = dir
	return nil
}

// Validate checks the settings.
func (a *App) Validate() error {
	for _, c := range a.BrandName {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("brand %q: only lowercase letters, digits, '-' and '_' are allowed", a.BrandName)
		}
	}
	return nil
}

// Start opens the database, so that a broken data_dir fails the config load.
func (a *App) Start() error {
	if _, err := a.Store(); err != nil {
		return err
	}
	current.Store(a)
	return nil
}

// Stop unpublishes the app; the database stays open until Cleanup.
func (a *App) Stop() error {
	current.CompareAndSwap(a, nil)
	return nil
}

// Cleanup releases this config's reference to the database; the last
// reference closes it.
func (a *App) Cleanup() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.store == nil {
		return nil
	}
	a.store = nil
	_, err := stores.Delete(a.dir)
	return err
}

// Store returns the shared store, opening it on first use.
func (a *App) Store() (*storage.Store, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.store != nil {
		return a.store, nil
	}
	val, _, err := stores.LoadOrNew(a.dir, func() (caddy.Destructor, error) {
		s, err := storage.Open(storage.Options{
			Dir:        a.dir,
			GCInterval: time.Duration(a.GCInterval),
			Logger:     a.logger.Named("badger"),
		})
		if err != nil {
			return nil, err
		}
		a.logger.Info("opened tollgate database", zap.String("dir", a.dir))
		return storeCloser{s}, nil
	})
	if err != nil {
		return nil, err
	}
	a.store = val.(storeCloser).Store
	return a.store, nil
}

// FreeModelLimits are the caps on ":free" models.
func (a *App) FreeModelLimits() handlers.FreeModelLimits { return a.FreeModel }

// Brand is the prefix of limit_source values and server tool types.
func (a *App) Brand() string { return a.BrandName }

type storeCloser struct{ *storage.Store }

func (s storeCloser) Destruct() error { return s.Close() }

// Interface guards
var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.Validator    = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
	_ handlers.Gateway   = (*App)(nil)
)
