package breaker

import (
	"context"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Shared is where the replicas of a shared database meet: each publishes
// the endpoints it opened and reads those every replica opened, as a map
// of endpoint names (Name) to when they reopen, in Unix milliseconds.
type Shared interface {
	Publish(ctx context.Context, opened map[string]int64) error
	Read(ctx context.Context) (map[string]int64, error)
}

// pending are the breakers this process opened since the last Sync
// round, with when they reopen.
var (
	pendingMu sync.Mutex
	pending   = map[*Breaker]time.Time{}
)

func opened(b *Breaker, until time.Time) {
	pendingMu.Lock()
	pending[b] = until
	pendingMu.Unlock()
}

// Name is an endpoint's name in the shared map.
func Name(model, provider string) string { return model + "\n" + provider }

// Sync shares the breakers with the other replicas every period until ctx
// ends: it publishes the endpoints this process opened and opens here
// those another opened, so that an endpoint one replica found down is
// out of routing at every replica within about a period. Each replica
// then probes it on its own once the cooldown is over. The request path
// never waits on it.
//
// shared is looked up at each round: nil while there is no shared
// database (one node keeps its breakers in memory alone).
func Sync(ctx context.Context, shared func() Shared, period time.Duration, log *zap.Logger) {
	t := time.NewTicker(period)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sh := shared()
		if sh == nil {
			continue
		}
		err := syncOnce(ctx, sh, time.Now(), log)
		if err != nil && !failing && log != nil {
			log.Warn("sharing endpoint circuit breakers failed; each replica keeps its own until it succeeds", zap.Error(err))
		}
		failing = err != nil
	}
}

func syncOnce(ctx context.Context, sh Shared, now time.Time, log *zap.Logger) error {
	pendingMu.Lock()
	out := make(map[string]int64, len(pending))
	for b, until := range pending {
		if until.After(now) {
			out[Name(b.model, b.provider)] = until.UnixMilli()
		}
	}
	clear(pending)
	pendingMu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if len(out) > 0 {
		if err := sh.Publish(cctx, out); err != nil {
			requeue(out)
			return err
		}
	}
	in, err := sh.Read(cctx)
	if err != nil {
		return err
	}
	for name, ms := range in {
		model, provider, ok := strings.Cut(name, "\n")
		if !ok {
			continue
		}
		if _, known := registry.Load(key{model, provider}); !known {
			continue // not in this replica's catalog
		}
		For(model, provider).openUntil(time.UnixMilli(ms), now, log)
	}
	return nil
}

// requeue puts back opens a failed Publish did not share.
func requeue(out map[string]int64) {
	pendingMu.Lock()
	defer pendingMu.Unlock()
	for name, ms := range out {
		model, provider, _ := strings.Cut(name, "\n")
		b := For(model, provider)
		if _, again := pending[b]; !again {
			pending[b] = time.UnixMilli(ms)
		}
	}
}
