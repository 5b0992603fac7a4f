package storage

import (
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/respcache"
)

// sharedResponseCache is the response cache's table the replicas share
// on backend b (Redis); nil on one node, whose cache is the handler's own
// memory.
func sharedResponseCache(b kernel.Backend) respcache.Table {
	if shared, ok := b.(interface{ ResponseCache() respcache.Table }); ok {
		return shared.ResponseCache()
	}
	return nil
}

// SharedResponseCache is the response cache's table the replicas share
// (on Redis); false on one node.
func (s *Store) SharedResponseCache() (respcache.Table, bool) {
	return s.respCache, s.respCache != nil
}
