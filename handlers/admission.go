package handlers

import (
	"errors"

	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// admit reserves a request's holds: decide runs on a snapshot of the
// ledger's figures (the request's policy: caps, budgets, balance, the
// output clamp), outside any storage lock, and the ledger commits the
// holds it returns only if those figures are unchanged; otherwise the
// decision is made again on fresh ones (storage.Ledger). decide's error
// refuses the request.
func admit(s *storage.Store, accountID, keyHash string, decide func(storage.LedgerView) (storage.Holds, error)) (*storage.Reservation, error) {
	for attempt := 0; ; attempt++ {
		res, err := admitOnce(s, accountID, keyHash, attempt, decide)
		if !errors.Is(err, storage.ErrStale) {
			return res, err
		}
	}
}

// admitOnce is one attempt of admit.
func admitOnce(s *storage.Store, accountID, keyHash string, attempt int, decide func(storage.LedgerView) (storage.Holds, error)) (*storage.Reservation, error) {
	var snap storage.Snapshot
	if err := s.Snapshot(&snap, accountID, keyHash, attempt); err != nil {
		return nil, err
	}
	// A refusal (or a panic) ends the snapshot: a late attempt's holds the
	// account's lock.
	committed := false
	defer func() {
		if !committed {
			s.Abandon(&snap)
		}
	}()
	h, err := decide(snap.View)
	if err != nil {
		return nil, err
	}
	committed = true
	return s.Commit(&snap, h)
}
