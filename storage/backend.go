package storage

import (
	"time"

	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/sharedledger"
)

// openLedger makes the ledger that runs on the chosen backend, once the
// store it keeps the money of exists.
type openLedger func(s *Store) ledgerBackend

// openBackend opens the backend opts choose and says which ledger runs on
// it: Redis (Options.Redis) and the shared ledger (package sharedledger),
// whose scripts keep the
// money in Redis for several replicas, or Badger and the in-process
// ledger. It is the one place the choice is made: nothing afterwards asks
// which backend the store runs on.
func openBackend(opts Options, log *zap.Logger) (kernel.Backend, openLedger, error) {
	if opts.Redis != nil {
		rb, err := kernel.OpenRedis(*opts.Redis, log)
		if err != nil {
			return nil, nil, err
		}
		return rb, func(s *Store) ledgerBackend {
			return sharedledger.New(sharedledger.Config{
				Kernel: s.k, Records: ledgerRecords{s.AccountStore, s.OrgStore}, Backend: rb,
				Publish: s.LedgerStore.genSubs.publish, StoredUntil: s.LedgerStore.storedUntil,
				Now: func() time.Time { return now() }, Log: log,
			})
		}, nil
	}
	b, err := kernel.OpenEmbedded(opts, log)
	if err != nil {
		return nil, nil, err
	}
	return b, func(s *Store) ledgerBackend {
		return newLocalLedger(s.k, s.AccountStore, s.OrgStore, s.LedgerStore.genSubs.publish)
	}, nil
}
