package sharedledger

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/internal/wait"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/ledger"
	"github.com/tollgate-dev/caddy-tollgate/storage/levels"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// The package's tests run the ledger as a store does, without one: its
// records are a map (records), and a replica follows the change feed for
// the money fields other replicas change (replica).

// eventually is wait.Eventually.
var eventually = wait.Eventually

// records are the accounts and keys a test's ledger charges; workspaces
// and members it has none.
type records struct {
	accounts map[string]*record.Account
	keys     map[string]*record.APIKey
}

var _ ledger.Records = (*records)(nil)

func (r *records) LedgerAccount(id string) *record.Account { return r.accounts[id] }
func (r *records) LedgerKey(hash string) *record.APIKey {
	k, ok := r.keys[hash]
	if !ok {
		return nil
	}
	c := *k
	return &c
}
func (r *records) LedgerAccountIDs(fn func(id string)) {
	for id := range r.accounts {
		fn(id)
	}
}
func (r *records) SetAccountCounters(id string, a levels.Account) bool {
	acct, ok := r.accounts[id]
	if !ok {
		return false
	}
	c := *acct
	c.Usage, c.BYOKUsage, c.FreeModelRequests, c.FreeModelMinute = a.Usage, a.BYOKUsage, a.FreeDay, a.FreeMinute
	r.accounts[id] = &c
	return true
}
func (r *records) SetKeyCounters(hash string, sc levels.Scope) bool {
	k, ok := r.keys[hash]
	if !ok {
		return false
	}
	c := *k
	c.Usage, c.BYOKUsage = sc.Usage, sc.BYOKUsage
	r.keys[hash] = &c
	return true
}
func (r *records) LedgerWorkspace(string, string) *record.Workspace             { return nil }
func (r *records) LedgerMember(string, string) *record.Member                   { return nil }
func (r *records) SetWorkspaceCounters(string, string, levels.Scope) bool       { return false }
func (r *records) SetMemberCounters(accountID, id string, sc levels.Scope) bool { return false }

// replica is one process's shared ledger on a Redis.
type replica struct {
	k    *kernel.Kernel
	rb   *kernel.RedisBackend
	l    *Ledger
	recs *records
}

// openReplica opens a replica on srv under prefix (lease 0: the
// default), following the feed until the test ends.
func openReplica(t *testing.T, srv *redistest.Server, prefix string, lease time.Duration) *replica {
	t.Helper()
	return openReplicaKeeping(t, srv, prefix, lease, true)
}

// openReplicaKeeping is openReplica with or without its lease keeper: a
// replica without one renews no lease, as a hung one would, and reaps only
// when the test calls ReapExpired.
func openReplicaKeeping(t *testing.T, srv *redistest.Server, prefix string, lease time.Duration, keeper bool) *replica {
	t.Helper()
	rb, err := kernel.OpenRedis(kernel.RedisOptions{Address: srv.Addr, KeyPrefix: prefix, HoldLease: lease}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	k := kernel.New(rb, zap.NewNop())
	r := &replica{k: k, rb: rb, recs: &records{accounts: map[string]*record.Account{}, keys: map[string]*record.APIKey{}}}
	r.l = New(Config{Kernel: k, Records: r.recs, Backend: rb})
	pos, err := rb.Position()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.l.LoadAll(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		rb.Follow(ctx, pos, kernel.FeedHandler{Apply: r.apply, Resync: func() error {
			if err := r.l.LoadAll(); err != nil {
				return err
			}
			r.k.Lock()
			r.l.OverlayAll()
			r.k.Unlock()
			return nil
		}})
	})
	if keeper {
		r.l.Start(ctx)
	} else {
		r.l.ctx = ctx
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		r.l.Wait()
		_ = k.Close() // the test's end
	})
	return r
}

// apply refreshes the money fields other replicas' scripts changed.
func (r *replica) apply(changes []kernel.Change) error {
	fields := map[string][]string{}
	for _, c := range changes {
		if c.Account != "" {
			fields[c.Account] = append(fields[c.Account], c.Fields...)
		}
	}
	if len(fields) == 0 {
		return nil
	}
	return r.l.Refresh(fields)
}

// addAccount gives every replica an account and a key of it (the records
// another replica would load from the feed).
func addAccount(id string, limit *money.Amount, reps ...*replica) record.APIKey {
	k := record.APIKey{Hash: "hash-" + id, AccountID: id, Name: "k", Limit: limit}
	for _, r := range reps {
		r.k.Lock()
		r.recs.accounts[id] = &record.Account{ID: id, Name: id, Kind: record.AccountOrganization}
		kc := k
		r.recs.keys[k.Hash] = &kc
		r.l.Overlay(id)
		r.k.Unlock()
	}
	return k
}

// account and key are the replica's records, as the ledger left them.
func (r *replica) account(id string) record.Account {
	r.k.RLock()
	defer r.k.RUnlock()
	return *r.recs.accounts[id]
}

func (r *replica) key(hash string) record.APIKey {
	r.k.RLock()
	defer r.k.RUnlock()
	return *r.recs.keys[hash]
}

// held is what the replica knows is held against the account and key.
func (r *replica) held(accountID, keyHash string) (account, key money.Amount) {
	r.k.RLock()
	defer r.k.RUnlock()
	return r.l.Held(accountID, keyHash)
}

// reserve places holds if they fit under the key's cap and the account's
// balance as the snapshot reads them (no decision but that), deciding
// again on a stale snapshot.
func (r *replica) reserve(accountID, keyHash string, h ledger.Holds) (*ledger.Reservation, error) {
	for attempt := 0; attempt < maxAttempts; attempt++ {
		v, st, err := r.l.Snapshot(accountID, keyHash, attempt >= 2)
		if err != nil {
			return nil, err
		}
		if v.Key.Limit != nil && v.Key.CapUsage(v.Now)+v.KeyHeld+h.Hold > *v.Key.Limit {
			r.l.Abandon(st)
			return nil, errRefused
		}
		res, err := r.l.Commit(st, h)
		if !errors.Is(err, ledger.ErrStale) {
			return res, err
		}
	}
	return nil, ledger.ErrContended
}

// errRefused is the key's cap's refusal.
var errRefused = errors.New("refused")
