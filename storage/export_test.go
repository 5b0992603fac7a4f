package storage

// StopFollowing stops a replica's change feed and lease renewals, as its
// death would, for the external tests.
func StopFollowing(s *Store) { s.stopFollowing() }
