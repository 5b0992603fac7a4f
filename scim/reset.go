package scim

// reset empties the SCIM index before the store reloads every record from
// the shared database (storage redis), so that a token rotated or a record
// deleted at another replica is gone here too (the kind's Reset). Callers
// hold the kernel's lock.
func (s *Store) reset() {
	clear(s.tokens)
	clear(s.byHash)
	clear(s.users)
	clear(s.groups)
	clear(s.mappings)
	clear(s.jobs)
	clear(s.grants)
}
