package kernel

import (
	"errors"
	"strings"
	"sync"

	"github.com/dgraph-io/badger/v4"
)

// The deletion log lets a start after a crash catch a snapshot of version
// V up from what changed since, instead of walking every record: a walk
// of the versions after V (badger.IteratorOptions.SinceTs) finds what was
// written since, but not always what was deleted since. Compaction may
// drop a tombstone together with the value under it, and then nothing
// after V says the record is gone. So each deletion of a record of a kind
// with LogDeletes also writes a marker, deletedPrefix + its key, in the
// same Badger transaction: its version is the deletion's (or later, when
// Badger splits a transaction too big for it). A marker is an ordinary
// entry, which compaction keeps.
//
// Markers only grow until a snapshot makes them redundant: once a
// snapshot of version V covering a prefix is durably in place, the
// markers at most V say nothing it does not (ForgetDeletions).

// deletedPrefix starts every marker of the deletion log.
const deletedPrefix = "~d/"

// deletionLog are the prefixes whose deletions a backend logs. Registered
// before the first commit, read by every commit.
type deletionLog struct {
	mu       sync.RWMutex
	prefixes []string
}

func (d *deletionLog) add(prefix string) {
	d.mu.Lock()
	d.prefixes = append(d.prefixes, prefix)
	d.mu.Unlock()
}

// logs reports whether deleting the record under key writes a marker.
func (d *deletionLog) logs(key string) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, p := range d.prefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// logDeletion adds the marker of the deletion of key to txn.
func logDeletion(txn *badger.Txn, key []byte) error {
	return txn.Set(append([]byte(deletedPrefix), key...), []byte{})
}

// deletedSince calls fn with the key of each record under prefix whose
// last logged deletion has a version above since.
func (b *badgerBackend) deletedSince(prefix string, since uint64, fn func(key []byte) error) error {
	return b.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte(deletedPrefix + prefix)
		opts.PrefetchValues = false
		opts.SinceTs = since
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := fn(it.Item().Key()[len(deletedPrefix):]); err != nil {
				return err
			}
		}
		return nil
	})
}

// forgetDeletions deletes the markers under prefix of version at most
// upTo (without markers of their own), and returns how many.
func (b *badgerBackend) forgetDeletions(prefix string, upTo uint64) (int, error) {
	var old [][]byte
	err := b.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte(deletedPrefix + prefix)
		opts.PrefetchValues = false
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if it.Item().Version() <= upTo {
				old = append(old, it.Item().KeyCopy(nil))
			}
		}
		return nil
	})
	if err != nil || len(old) == 0 {
		return 0, err
	}
	txn := b.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	for _, key := range old {
		err := txn.Delete(key)
		if errors.Is(err, badger.ErrTxnTooBig) {
			if txn, err = b.split(txn); err == nil {
				err = txn.Delete(key)
			}
		}
		if err != nil {
			return 0, err
		}
	}
	return len(old), txn.Commit()
}

// ScanDeletions implements Versioned: the journal moved into Badger
// first, so that its deletions are logged.
func (j *journal) ScanDeletions(prefix string, since uint64, fn func(key []byte) error) error {
	if err := j.checkpoint(); err != nil {
		return err
	}
	return j.db.deletedSince(prefix, since, fn)
}

// ForgetDeletions implements Versioned. It holds the checkpoints off: a
// marker it read as old must not be rewritten by a newer deletion before
// it deletes it.
func (j *journal) ForgetDeletions(prefix string, upTo uint64) (int, error) {
	j.ckMu.Lock()
	defer j.ckMu.Unlock()
	return j.db.forgetDeletions(prefix, upTo)
}
