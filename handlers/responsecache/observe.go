package responsecache

import "github.com/tollgate-dev/caddy-tollgate/telemetry"

// observer counts what this node's table evicts and holds in the
// metrics.
type observer struct{}

func (observer) Evicted(n int)     { telemetry.ResponseCacheEvicted(n) }
func (observer) Bytes(delta int64) { telemetry.ResponseCacheBytes(delta) }
