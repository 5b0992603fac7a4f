package storage

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"
)

// Writes are group-committed. A mutation changes the in-memory state under
// s.mu, marks the records it touched dirty and takes the current batch's
// done channel; the flusher then writes a snapshot of every dirty record in
// one Badger transaction and closes the channel. Because a snapshot is taken
// atomically under s.mu, the database only ever moves from one consistent
// in-memory state to a later one, in mutation order, and many requests
// share one disk round trip.

// ErrNotDurable is returned when a write could not be committed in time; the
// flusher keeps retrying it.
var ErrNotDurable = errors.New("write not yet durable")

// durableTimeout bounds how long a caller waits for its batch.
const durableTimeout = 30 * time.Second

// batch is one group commit.
type batch struct {
	done chan struct{}
}

// markDirty records that the record under key must be written (or deleted,
// if it no longer exists in memory). Callers hold s.mu.
func (s *Store) markDirty(key string) *batch {
	s.dirty[key] = struct{}{}
	return s.pending()
}

// appendRecord queues an immutable record. Callers hold s.mu.
func (s *Store) appendRecord(key string, v any) *batch {
	s.appends = append(s.appends, kv{key, v})
	return s.pending()
}

// pending returns the open batch and wakes the flusher. Callers hold s.mu.
func (s *Store) pending() *batch {
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return s.open
}

// wait blocks until b is durable.
func (b *batch) wait() error {
	t := time.NewTimer(durableTimeout)
	defer t.Stop()
	select {
	case <-b.done:
		return nil
	case <-t.C:
		return ErrNotDurable
	}
}

type kv struct {
	key string
	val any
}

// flushLoop commits batches until Close.
func (s *Store) flushLoop() {
	defer close(s.flushDone)
	for {
		select {
		case <-s.wake:
		case <-s.stopFlush:
			s.flushAll()
			return
		}
		s.flushAll()
	}
}

// flushAll commits everything dirty, retrying on failure: memory is the
// truth and the disk must catch up with it.
func (s *Store) flushAll() {
	for backoff := 10 * time.Millisecond; ; backoff = min(backoff*2, 5*time.Second) {
		err := s.flushOnce()
		if err == nil {
			return
		}
		s.log.Error("committing to the database failed; retrying", zap.Error(err), zap.Duration("backoff", backoff))
		select {
		case <-time.After(backoff):
		case <-s.stopFlush:
			if s.closing {
				return
			}
		}
	}
}

// flushOnce takes a snapshot of the dirty records and commits it.
func (s *Store) flushOnce() error {
	s.mu.Lock()
	if len(s.dirty) == 0 && len(s.appends) == 0 {
		s.mu.Unlock()
		return nil
	}
	writes := make([]kv, 0, len(s.dirty)+len(s.appends))
	for k := range s.dirty {
		writes = append(writes, kv{k, s.snapshot(k)})
	}
	writes = append(writes, s.appends...)
	b := s.open
	s.dirty = make(map[string]struct{}, len(s.dirty))
	s.appends = nil
	s.open = &batch{done: make(chan struct{})}
	s.mu.Unlock()

	if err := s.commit(writes); err != nil {
		// Put the work back; newer mutations may have re-dirtied the same
		// records, and their next snapshot covers this one.
		s.mu.Lock()
		for _, w := range writes {
			if isAppend(w.key) {
				s.appends = append(s.appends, w)
			} else {
				s.dirty[w.key] = struct{}{}
			}
		}
		// Waiters of b are now waiting on the open batch's commit.
		old := s.open
		s.open = b
		go func() { <-b.done; close(old.done) }()
		s.mu.Unlock()
		return err
	}
	close(b.done)
	return nil
}

// snapshot returns a copy of the record behind a dirty key, or nil when it
// was deleted. Callers hold s.mu.
func (s *Store) snapshot(key string) any {
	switch {
	case hasPrefix(key, prefixAccount):
		if a, ok := s.accounts[key[len(prefixAccount):]]; ok {
			return *a
		}
	case hasPrefix(key, prefixAPIKey):
		if k, ok := s.keys[key[len(prefixAPIKey):]]; ok {
			return *k
		}
	case hasPrefix(key, prefixMgmtKey):
		if m, ok := s.mgmtKeys[key[len(prefixMgmtKey):]]; ok {
			return *m
		}
	case hasPrefix(key, prefixBYOK):
		return s.byokSnapshot(key)
	case hasPrefix(key, prefixEndUser):
		return s.endUserSnapshot(key)
	case hasPrefix(key, prefixDestination):
		return s.destinationSnapshot(key)
	case hasPrefix(key, prefixPrivateEndpoint):
		return s.privateEndpointSnapshot(key)
	case hasPrefix(key, prefixMember):
		return s.memberSnapshot(key)
	case hasPrefix(key, prefixWorkspace):
		return s.workspaceSnapshot(key)
	case hasPrefix(key, prefixGuardrail):
		return s.guardrailSnapshot(key)
	case hasPrefix(key, prefixSCIM):
		return s.scimSnapshot(key)
	case hasPrefix(key, prefixWorkspaceUsage), hasPrefix(key, prefixMemberUsage):
		return s.usageSnapshot(key)
	}
	return nil
}

func isAppend(key string) bool {
	return hasPrefix(key, prefixPurchase) || hasPrefix(key, prefixGeneration) || hasPrefix(key, prefixFeedback)
}

// encode marshals a record; a type with its own encoder is called directly,
// since encoding/json would re-validate and compact its output.
func encode(v any) ([]byte, error) {
	if m, ok := v.(json.Marshaler); ok {
		return m.MarshalJSON()
	}
	return json.Marshal(v)
}

// commit writes one batch in one transaction, splitting only when Badger
// says the transaction is too big (then each part is still a consistent
// prefix of the snapshot's records, and the flusher never reports success
// before all parts landed).
func (s *Store) commit(writes []kv) error {
	txn := s.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	for _, w := range writes {
		var err error
		if w.val == nil {
			err = txn.Delete([]byte(w.key))
		} else {
			var b []byte
			b, err = encode(w.val)
			if err == nil {
				err = txn.Set([]byte(w.key), b)
			}
		}
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err := txn.Commit(); err != nil {
				return err
			}
			txn = s.db.NewTransaction(true)
			if w.val == nil {
				err = txn.Delete([]byte(w.key))
			} else {
				b, _ := encode(w.val)
				err = txn.Set([]byte(w.key), b)
			}
		}
		if err != nil {
			return err
		}
	}
	return txn.Commit()
}
