package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/storage/analytics"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/ledger"
)

// Several replicas on one Redis.
//
// The store never asks which backend it runs on: it follows the
// backend's change feed (kernel.Feed: Kernel.Feed chooses it once; on
// Badger a feed that never changes) and reserves through the Ledger
// chosen with the backend at Open (openBackend). With Options.Redis the records live
// in Redis (kernel.RedisBackend) and every replica keeps its full
// in-memory copy, so that authentication and admission still read memory
// only. Each commit announces its keys on the change feed; the other
// replicas reload their memory from Redis when they read such an entry
// (Kernel.Reload) and have the ledger re-apply the money fields, which
// live apart from the records (package sharedledger) so that no replica ever
// overwrites a counter with a stale copy. When the feed cannot prove that
// nothing was missed (kernel.RedisBackend.Follow), the replica reloads
// every record of every kind (resync) and refuses admission and writes
// until it has (Synced, ErrResyncing).

// ErrUnavailable is returned while the shared database cannot be reached:
// handlers answer 503 and serve nothing they could not meter.
var ErrUnavailable = kernel.ErrUnavailable

// ErrResyncing is returned by admission while the replica reloads its
// records from the shared database after its change feed lost continuity
// (Synced): it does not decide on rules that may be stale. Handlers answer
// 503.
var ErrResyncing = ledger.ErrResyncing

// Shared reports whether the store runs on a shared backend.
func (s *Store) Shared() bool { return s.feed.Shared() }

// Available reports whether the store can make changes durable right now:
// always on Badger; on Redis, while the server answers.
func (s *Store) Available() bool { return s.feed.Available() }

// Synced reports whether the records in memory provably include every
// other replica's change: always on Badger; on Redis, except from the
// moment the change feed loses continuity (a broken connection, a Redis
// restart or failover, a gap in the feed) until every record of every
// kind is reloaded.
func (s *Store) Synced() bool { return s.feed.Synced() }

// follow starts the ledger's background work and follows the change feed
// from position pos (taken before the warm-up), after the ledger's
// counters are read; on Badger both are no-ops.
func (s *Store) follow(pos string) error {
	if err := s.impl.LoadAll(); err != nil {
		return fmt.Errorf("loading the money counters: %w", err)
	}
	s.k.Lock()
	s.impl.OverlayAll()
	s.k.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s.stopFollowing = func() {
		cancel()
		<-done
		s.impl.Wait()
	}
	go func() {
		defer close(done)
		s.feed.Follow(ctx, pos, kernel.FeedHandler{Apply: s.applyChanges, Resync: s.resync})
	}()
	s.impl.Start(ctx)
	return nil
}

// applyChanges applies other replicas' feed entries: refreshed money
// fields for a ledger script's entry, the changed records (a reload for
// kinds that cannot be applied alone). An error means records may be
// missing from memory: the caller (Follow) reloads everything.
func (s *Store) applyChanges(changes []kernel.Change) error {
	records := false
	accounts := map[string]map[string]struct{}{} // account -> changed fields
	s.addRemoteGenerations(changes)
	for _, c := range changes {
		if len(c.Keys) > 0 {
			records = true
		}
		if c.Account != "" {
			fs := accounts[c.Account]
			if fs == nil {
				fs = map[string]struct{}{}
				accounts[c.Account] = fs
			}
			for _, f := range c.Fields {
				fs[f] = struct{}{}
			}
		}
	}
	if records {
		keys, incremental := changedRecords(changes, s.k.Incremental)
		if !incremental {
			// A reload re-reads every account's money as well.
			return s.resync()
		}
		if len(keys) > 0 {
			if err := s.applyRecords(keys); err != nil {
				return err
			}
		}
	}
	byField := map[string][]string{}
	for id, fs := range accounts {
		if len(fs) > 0 { // every script writes at least the account's field
			byField[id] = slices.Collect(maps.Keys(fs))
		}
	}
	if len(byField) == 0 {
		return nil
	}
	// Stale money fields are safe (a script that read them fails its
	// comparison and reads them again): no reload for these.
	if err := s.impl.Refresh(byField); err != nil && !errors.Is(err, ErrUnavailable) {
		s.log.Error("reading accounts' counters from redis failed", zap.Error(err))
	}
	return nil
}

// incrementalPrefixes are the kinds of record whose Load replaces one
// record in memory and nothing else (no index of its own to update), so
// that another replica's change of one is applied alone; a change of any
// other kind (SCIM's, or a migration) reloads everything.
var incrementalPrefixes = []string{
	prefixAccount, prefixPurchase, prefixMgmtKey, prefixAPIKey,
	prefixMember, prefixWorkspace, prefixGuardrail, prefixWorkspaceUsage, prefixMemberUsage,
	prefixBYOK, prefixEndUser, prefixDestination, prefixPrivateEndpoint,
}

// changedRecords lists the record keys of the feed entries, and whether
// each can be applied alone (one of incrementalPrefixes, or of a kind
// with a Remove: alone reports that).
func changedRecords(changes []kernel.Change, alone func(key string) bool) ([]string, bool) {
	seen := map[string]struct{}{}
	var keys []string
	for _, c := range changes {
		for _, k := range c.Keys {
			if strings.HasPrefix(k, analytics.SealedHourPrefix) || k == analytics.SealedBeforeKey {
				continue // sums this replica's rollup counted itself, and their watermark
			}
			if !slices.ContainsFunc(incrementalPrefixes, func(p string) bool { return strings.HasPrefix(k, p) }) && !alone(k) {
				return nil, false
			}
			if _, ok := seen[k]; !ok {
				seen[k] = struct{}{}
				keys = append(keys, k)
			}
		}
	}
	return keys, true
}

// applyRecords applies other replicas' changes of the records under keys,
// then the money fields of their accounts (a record carries stale
// counters, or none).
func (s *Store) applyRecords(keys []string) error {
	accounts := map[string]struct{}{}
	return s.k.Apply(keys, s.feed.GetValues, func(key string, value []byte) error {
		if id, ok := recordAccount(key); ok {
			accounts[id] = struct{}{}
		}
		if value == nil {
			s.removeRecord(key)
			return nil
		}
		err := s.loadRecord(key, value)
		if hash, ok := strings.CutPrefix(key, prefixAPIKey); ok {
			if k, ok := s.AccountStore.keyOf(hash); ok {
				accounts[k.AccountID] = struct{}{}
			}
		}
		return err
	}, func() {
		s.OrgStore.rulesChanged()
		for id := range accounts {
			s.impl.Overlay(id)
		}
	})
}

// loadRecord loads a changed record. A workspace's or member's record
// does not carry its usage (its usage record and the money fields do), so
// the usage in memory is kept. Callers hold the kernel's lock.
func (s *Store) loadRecord(key string, value []byte) error {
	defer s.OrgStore.keepUsage(key)()
	return s.k.LoadRecord(key, value)
}

// removeRecord drops a record another replica deleted: the kind's store
// drops its own (Kind.Remove). Purchases are never deleted; a deleted
// usage record leaves the counters to the money fields. Callers hold the
// kernel's lock.
func (s *Store) removeRecord(key string) { s.k.RemoveRecord(key) }

// recordAccount is the account a record key belongs to.
func recordAccount(key string) (string, bool) {
	i := strings.IndexByte(key, '/')
	if i < 0 {
		return "", false
	}
	rest := key[i+1:]
	if strings.HasPrefix(key, prefixAPIKey) || strings.HasPrefix(key, prefixMgmtKey) {
		return "", false // by hash: the key's account is in its record
	}
	id, _, _ := strings.Cut(rest, "/")
	return id, id != ""
}

// addRemoteGenerations adds the generations other replicas settled to
// this replica's analytics rollup, so that every replica's analytics equal
// what was charged. They are not published to this replica's subscribers
// (the export): the replica that settled a generation exports it, once.
func (s *Store) addRemoteGenerations(changes []kernel.Change) {
	var keys []string
	for _, c := range changes {
		for _, id := range c.Generations {
			keys = append(keys, prefixGeneration+id)
		}
	}
	err := s.feed.GetMany(keys, func(key string, v []byte) {
		var g Generation
		if err := json.Unmarshal(v, &g); err != nil {
			s.log.Error("decoding another replica's generation failed", zap.String("key", key), zap.Error(err))
			return
		}
		// Its end user, if new, reaches this replica as a record.
		s.AnalyticsStore.a.CountGeneration(g, false)
	})
	if err != nil {
		s.log.Error("reading other replicas' generations failed", zap.Error(err))
	}
}

// resync reloads every record and every account's money fields from
// Redis: after another replica's commit, or a broken feed.
func (s *Store) resync() error {
	if err := s.impl.LoadAll(); err != nil {
		return err
	}
	return s.k.Reload(func() {
		s.OrgStore.ensureDefaultWorkspacesInMemory()
		s.OrgStore.rulesChanged()
		s.impl.OverlayAll()
	})
}

// ShareKeyCeiling makes the per-key abuse ceiling one bucket per key for
// every replica on the shared backend, taken in the admission script (no
// extra round trip): an inference request beyond it fails its reservation
// with a *CeilingError. Nil removes it; nothing on Badger.
func (s *Store) ShareKeyCeiling(c *KeyCeiling) { s.impl.ShareKeyCeiling(c) }
