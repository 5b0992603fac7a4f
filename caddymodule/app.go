package caddymodule

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/egress"
	"github.com/tollgate-dev/caddy-tollgate/export"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/connect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/moderation"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/websearch"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/storage/backends"
	"github.com/tollgate-dev/caddy-tollgate/telemetry"
)

func init() {
	caddy.RegisterModule(new(App))
}

// App is the `tollgate` Caddy app: it owns the embedded database and the
// settings shared by the gateway's handlers.
type App struct {
	// DataDir is the Badger directory. Default: "tollgate" under Caddy's
	// app data directory. DataDir, SyncWrites and GCInterval are the
	// badger backend's options when StorageRaw does not set them.
	DataDir string `json:"data_dir,omitempty"`
	// Brand prefixes limit_source values and the web search tool type.
	// Default: "service".
	BrandName string `json:"brand,omitempty"`
	// GCInterval is how often Badger's value log is garbage-collected.
	// Default: 5m.
	GCInterval caddy.Duration `json:"gc_interval,omitempty"`
	// GenerationRetention is how long generation records are kept (their
	// analytics sums are kept apart). Default: 30 days; at least 1h.
	GenerationRetention caddy.Duration `json:"generation_retention,omitempty"`
	// SyncWrites fsyncs every group commit. Without it an acknowledged
	// change survives a crash of the process (kill -9), the database's log
	// being in the kernel's page cache; with it, a power loss too, at the
	// cost of one fsync per commit (shared by concurrent requests).
	SyncWrites bool `json:"sync_writes,omitempty"`
	// FreeModel sets the request caps on ":free" models.
	FreeModel gateway.FreeModelLimits `json:"free_model,omitempty"`
	// RateLimits are the rate limits of every account that sets none of
	// its own.
	RateLimits *storage.RateLimits `json:"rate_limits,omitempty"`
	// InFlight configures the in-flight spending budget: how much of a
	// prepaid account's balance its running requests may hold at once.
	InFlight *InFlightConfig `json:"in_flight,omitempty"`
	// ModelsFile is a JSON models list in the public format whose models
	// may carry a "tollgate": {"providers": [...]} extension; read at
	// every config load.
	ModelsFile string `json:"models_file,omitempty"`
	// Models are the catalog's models after those of ModelsFile.
	Models []ModelConfig `json:"models,omitempty"`
	// BYOKKey is the key that encrypts BYOK provider keys at rest: 32
	// bytes in standard base64, usually {env.TOLLGATE_BYOK_KEY}. Unset (or
	// a placeholder that expands to nothing): BYOK is off.
	BYOKKey string `json:"byok_encryption_key,omitempty"`
	// WebSearch configures the gateway-side search engines.
	WebSearch *websearch.Config `json:"web_search,omitempty"`
	// Moderation is the operator's moderation provider (OpenAI's
	// /v1/moderations shape); unset: none.
	Moderation *moderation.Config `json:"moderation,omitempty"`
	// CustomerEgress is the policy of URLs that customers supply.
	CustomerEgress *EgressConfig `json:"customer_egress,omitempty"`
	// MetricsPerKey turns on the per-key metrics (account and key hash
	// labels) for at most this many keys; later keys count as "other".
	// Default 0: off.
	MetricsPerKey int `json:"metrics_per_key,omitempty"`
	// StorageRaw is the database behind the gateway: a module of namespace
	// tollgate.storage named by its backend, with its own options:
	// {"backend": "redis", "address": ...} for several replicas (package
	// storage/backends/redis). Unset: {"backend": "badger"} with DataDir,
	// SyncWrites and GCInterval (package storage/backends/badger). The
	// older form {"redis": {...}} is read as {"backend": "redis", ...}.
	StorageRaw json.RawMessage `json:"storage,omitempty" caddy:"namespace=tollgate.storage inline_key=backend"`
	// CodeTTL is how long an authorization code of the connect
	// flow (OAuth PKCE) may wait for its exchange. Default 5m, at most 10m.
	CodeTTL caddy.Duration `json:"connect_code_ttl,omitempty"`

	logger *zap.Logger

	catalog  *catalog.Catalog
	inFlight billing.InFlightPolicy
	sealer   *storage.Sealer
	search   *websearch.Settings
	egress   *egress.Policy
	moderate *moderation.Service

	// backend is StorageRaw as the app loaded it (loadStorage).
	backend backends.Module

	mu    sync.Mutex
	dir   string // the backend's Key: the store's name in the pool
	store *storage.Store

	exporter *export.Exporter // observability export (startExporter), under mu
}

// MaxMetricsPerKey bounds metrics_per_key: each key labelled costs three
// series in every scrape.
const MaxMetricsPerKey = 100000

// stores shares one open database per directory across config reloads:
// Badger locks its directory, and a reload provisions the new config before
// the old one is cleaned up.
var stores = caddy.NewUsagePool()

// CaddyModule returns the Caddy module information.
func (*App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  gateway.AppName,
		New: func() caddy.Module { return new(App) },
	}
}

// Provision sets defaults and builds the model catalog. It does not open
// the database, so that `caddy validate` works while a server holds the
// directory lock.
func (a *App) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger()
	a.warnBesideRedis()
	if a.BrandName == "" {
		a.BrandName = "service"
	}
	if a.GCInterval == 0 {
		a.GCInterval = caddy.Duration(5 * time.Minute)
	}
	if a.CodeTTL == 0 {
		a.CodeTTL = caddy.Duration(connect.DefaultCodeTTL)
	}
	a.FreeModel = a.FreeModel.WithDefaults()
	a.inFlight = a.InFlight.policy()
	// The collectors are the process's; each config's registry gets them.
	if err := telemetry.Register(ctx.GetMetricsRegistry(), a.MetricsPerKey > 0); err != nil {
		return fmt.Errorf("metrics: %v", err)
	}
	if err := a.loadStorage(ctx); err != nil {
		return err
	}
	a.dir = a.backend.Key()
	repl := caddy.NewReplacer()
	var err error
	if a.sealer, err = a.byokSealer(repl); err != nil {
		return err
	}
	if a.egress, err = a.CustomerEgress.policy(); err != nil {
		return err
	}
	if err := a.WebSearch.Load(ctx); err != nil {
		return err
	}
	if a.search, err = a.WebSearch.Build(repl, nil); err != nil {
		return err
	}
	if a.moderate, err = a.Moderation.Build(repl); err != nil {
		return err
	}
	for i := range a.Models {
		for j := range a.Models[i].Providers {
			pc := &a.Models[i].Providers[j]
			if err := pc.loadDialect(ctx); err != nil {
				return fmt.Errorf("model %q: provider %q: %v", a.Models[i].ID, pc.Name, err)
			}
		}
	}
	a.catalog, err = a.loadCatalog()
	return err
}

// byokSealer builds the BYOK sealer from byok_encryption_key; nil when it
// is unset. The key never appears in errors or logs.
func (a *App) byokSealer(repl *caddy.Replacer) (*storage.Sealer, error) {
	if a.BYOKKey == "" {
		return nil, nil
	}
	v := strings.TrimSpace(repl.ReplaceAll(a.BYOKKey, ""))
	if v == "" && a.logger != nil {
		a.logger.Warn("byok_encryption_key expands to nothing: BYOK is off")
	}
	if v == "" {
		return nil, nil
	}
	key, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(key) != storage.SealerKeySize {
		return nil, fmt.Errorf("byok_encryption_key: expected %d bytes in standard base64 (e.g. `openssl rand -base64 32`)", storage.SealerKeySize)
	}
	return storage.NewSealer(key)
}

// Validate refuses the values that Provision would otherwise take
// silently (Provision itself refuses what it cannot build: catalog,
// engines, BYOK key, egress); each error names its field. Zero values are
// the defaults, so Validate holds before Provision as after.
func (a *App) Validate() error {
	for _, c := range a.BrandName {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("brand %q: only lowercase letters, digits, '-' and '_' are allowed", a.BrandName)
		}
	}
	if a.GCInterval < 0 {
		return fmt.Errorf("gc_interval: must not be negative, got %v", time.Duration(a.GCInterval))
	}
	if err := checkGenerationRetention(a.GenerationRetention); err != nil {
		return err
	}
	if a.CodeTTL < 0 || time.Duration(a.CodeTTL) > connect.MaxCodeTTL {
		return fmt.Errorf("connect_code_ttl: expected a duration up to %v, got %v", connect.MaxCodeTTL, time.Duration(a.CodeTTL))
	}
	if err := validateFreeModel(a.FreeModel); err != nil {
		return err
	}
	if err := a.RateLimits.Validate("rate_limits"); err != nil {
		return err
	}
	if a.MetricsPerKey < 0 || a.MetricsPerKey > MaxMetricsPerKey {
		return fmt.Errorf("metrics_per_key: expected 1 to %d keys, got %d", MaxMetricsPerKey, a.MetricsPerKey)
	}
	return a.InFlight.validate()
}

// validateFreeModel refuses negative caps, which would refuse every free
// request, and a negative threshold, which would give every account the
// paid cap.
func validateFreeModel(l gateway.FreeModelLimits) error {
	for _, f := range []struct {
		name string
		v    int64
	}{{"per_minute", l.PerMinute}, {"per_day", l.PerDay}, {"per_day_paid", l.PerDayPaid}} {
		if f.v < 0 {
			return fmt.Errorf("free_model: %s: expected a positive integer, got %d", f.name, f.v)
		}
	}
	if l.PaidThreshold < 0 {
		return fmt.Errorf("free_model: paid_threshold: expected a non-negative amount, got %s", l.PaidThreshold)
	}
	return nil
}

// Start opens the database, so that a broken data_dir fails the config load.
func (a *App) Start() error {
	store, err := a.Store()
	if err != nil {
		return err
	}
	a.mu.Lock()
	err = a.startExporter(store)
	a.mu.Unlock()
	telemetry.SetKeyBound(a.MetricsPerKey)
	if err != nil {
		return err
	}
	return nil
}

// Stop does nothing: the database stays open until Cleanup.
func (a *App) Stop() error {
	return nil
}

// Cleanup releases this config's reference to the database; the last
// reference closes it.
func (a *App) Cleanup() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.stopExporter(); err != nil {
		return err
	}
	if a.store == nil {
		return nil
	}
	a.store = nil
	_, err := stores.Delete(a.dir)
	return err
}

// checkGenerationRetention refuses a retention under an hour (0 is the
// default).
func checkGenerationRetention(d caddy.Duration) error {
	if r := time.Duration(d); r < 0 || r > 0 && r < storage.MinGenerationRetention {
		return fmt.Errorf("generation_retention: must be at least 1h, got %v", r)
	}
	return nil
}

// Store returns the shared store, opening it on first use.
func (a *App) Store() (*storage.Store, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.store != nil {
		return a.store, nil
	}
	val, _, err := stores.LoadOrNew(a.dir, func() (caddy.Destructor, error) {
		// Every backend's group commits are timed and counted.
		opts := a.backend.Options()
		opts.OnCommit, opts.Logger = telemetry.ObserveCommit, a.logger.Named(a.backend.CaddyModule().ID.Name())
		s, err := storage.Open(opts)
		if err != nil {
			if opts.Redis != nil {
				return nil, fmt.Errorf("storage: %w", err)
			}
			return nil, err
		}
		msg := "opened tollgate database"
		if s.Shared() {
			msg = "opened the shared tollgate database"
		}
		a.logger.Info(msg, a.backend.Describe()...)
		return storeCloser{s}, nil
	})
	if err != nil {
		return nil, err
	}
	a.store = val.(storeCloser).Store
	// The store outlives a config reload; the retention is this config's.
	if err := a.store.SetGenerationRetention(time.Duration(a.GenerationRetention)); err != nil {
		return nil, err
	}
	return a.store, nil
}

// FreeModelLimits are the caps on ":free" models.
func (a *App) FreeModelLimits() gateway.FreeModelLimits { return a.FreeModel }

// DefaultRateLimits are the rate limits of an account without its own.
func (a *App) DefaultRateLimits() *storage.RateLimits { return a.RateLimits }

// Catalog is the operator's model catalog.
func (a *App) Catalog() *catalog.Catalog { return a.catalog }

// InFlightPolicy configures the in-flight spending budget.
func (a *App) InFlightPolicy() billing.InFlightPolicy { return a.inFlight }

// Brand is the prefix of limit_source values and server tool types.
func (a *App) Brand() string { return a.BrandName }

// ConnectCodeTTL is the lifetime of a connect flow's authorization code.
func (a *App) ConnectCodeTTL() time.Duration { return time.Duration(a.CodeTTL) }

// WebSearchSettings is the provisioned web search setup.
func (a *App) WebSearchSettings() *websearch.Settings { return a.search }

// ModerationService is the provisioned moderation provider; nil: none.
func (a *App) ModerationService() *moderation.Service { return a.moderate }

// BYOKSealer seals and opens BYOK provider keys; nil when BYOK is off.
func (a *App) BYOKSealer() *storage.Sealer { return a.sealer }

// validate checks the configured values; unset fields take the defaults.
func (c *InFlightConfig) validate() error {
	if c == nil {
		return nil
	}
	if err := checkInFlightField("fraction", c.Fraction); err != nil {
		return err
	}
	for _, f := range []struct{ name, s string }{
		{"ceiling", c.Ceiling}, {"per_request_cap", c.PerRequestCap},
		{"balance_threshold", c.BalanceThreshold}, {"established_usage", c.EstablishedUsage},
	} {
		if err := checkInFlightField(f.name, f.s); err != nil {
			return err
		}
	}
	if c.SettlementWindow < 0 {
		return fmt.Errorf("in_flight: settlement_window: must not be negative")
	}
	return nil
}

// checkInFlightField checks one decimal option of in_flight; "" is unset.
func checkInFlightField(name, s string) error {
	if s == "" {
		return nil
	}
	a, err := money.ParseAmount(s)
	if name == "fraction" {
		// policy() keeps millionths: a finer fraction would silently round.
		if err != nil || a <= 0 || a > money.AmountScale || a%1000 != 0 {
			return fmt.Errorf("in_flight: fraction: expected a decimal in (0, 1] with at most 6 decimal places, got %q", s)
		}
		return nil
	}
	if err != nil || a < 0 {
		return fmt.Errorf("in_flight: %s: expected a non-negative decimal amount, got %q", name, s)
	}
	return nil
}

type storeCloser struct{ *storage.Store }

func (s storeCloser) Destruct() error { return s.Close() }

// Interface guards
var (
	_ caddy.App             = (*App)(nil)
	_ caddy.Provisioner     = (*App)(nil)
	_ caddy.Validator       = (*App)(nil)
	_ caddy.CleanerUpper    = (*App)(nil)
	_ caddyfile.Unmarshaler = (*App)(nil)
	_ gateway.Gateway       = (*App)(nil)
)

var _ websearch.Provider = (*App)(nil)
var _ moderation.Provider = (*App)(nil)
