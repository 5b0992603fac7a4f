package scim

import "github.com/tollgate-dev/caddy-tollgate/storage"

var _ storage.Resettable = (*Store)(nil)

// Reset empties the SCIM index before the store reloads every record from
// the shared database (storage redis), so that a token rotated or a record
// deleted at another replica is gone here too. Callers hold the kernel's
// lock.
func (s *Store) Reset() {
	s.tokens, s.byHash = map[string]*Token{}, map[string]string{}
	s.users, s.groups = map[string]map[string]*userAttrs{}, map[string]map[string]*Group{}
	s.mappings, s.jobs = map[string]map[string]*GroupMapping{}, map[string]map[string]*SyncJob{}
	s.grants = map[string]*grantRecord{}
}
