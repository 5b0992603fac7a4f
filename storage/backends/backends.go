// Package backends is the seam of the store's backends: each is a Caddy
// guest module of namespace tollgate.storage (badger, the embedded
// default; redis, for several replicas), configured by its own fields and
// UnmarshalCaddyfile, which the tollgate app loads with ctx.LoadModule as
// reverse_proxy loads its transport. A module says how the store opens;
// the app opens it once per Key and shares it across config reloads.
package backends

import (
	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// Namespace is the backends' module namespace.
const Namespace = "tollgate.storage"

// Module is a storage backend.
type Module interface {
	caddy.Module
	// Options are the store's options on this backend; the app adds its
	// logger and commit hook.
	Options() storage.Options
	// Key names the open store, shared across config reloads (a reload
	// provisions the new config before it cleans up the old one): one per
	// Badger directory, one per Redis server, database and key prefix.
	Key() string
	// Describe is what the app logs once it opened the store.
	Describe() []zap.Field
}
