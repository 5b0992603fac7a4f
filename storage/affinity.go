package storage

import (
	"github.com/tollgate-dev/caddy-tollgate/storage/affinity"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
)

// affinityFor is sticky routing's table on backend b: on Redis the
// replicas' shared one, else this process's memory.
func affinityFor(b kernel.Backend) affinity.Table {
	if shared, ok := b.(interface{ Affinity() affinity.Table }); ok {
		return shared.Affinity()
	}
	return affinity.NewMemory(0)
}

// Affinity is the table of the endpoints conversations stick to (sticky
// routing).
func (s *Store) Affinity() affinity.Table { return s.affinity }
