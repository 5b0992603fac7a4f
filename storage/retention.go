package storage

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage/analytics"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// Generation records (one per request) and their upstream-id index expire
// after the generation retention: a lookup of an older id answers
// ExpiredError at once, and the backend deletes the records a little later
// (Badger's TTL, Redis's PEXPIREAT, set with the write). The analytics
// rollup does not read them back: its hourly sums are kept in records of
// their own (SealRollup), which the retention does not touch.

// DefaultGenerationRetention is how long generation records are kept.
const DefaultGenerationRetention = 30 * 24 * time.Hour

// MinGenerationRetention is the shortest retention: the rollup seals an
// hour's sums an hour after it ends, so shorter would not make records
// expire sooner.
const MinGenerationRetention = time.Hour

// expiryMargin is how much longer than the retention the backend keeps a
// generation record: until its hour's rollup sums are surely sealed
// (sealGrace after the hour ends), so that a restart meanwhile still
// counts it. A lookup answers expired from the retention on.
const expiryMargin = 2 * time.Hour

// retention is a store's generation retention, in nanoseconds; it may
// change with a config reload (SetGenerationRetention).
type retention struct{ d atomic.Int64 }

func (r *retention) get() time.Duration {
	if d := r.d.Load(); d > 0 {
		return time.Duration(d)
	}
	return DefaultGenerationRetention
}

// SetGenerationRetention sets how long generation records are kept (0:
// DefaultGenerationRetention); it applies to records written from now on
// (their expiry is set with the write) and to every lookup.
func (s *LedgerStore) SetGenerationRetention(d time.Duration) error {
	if d != 0 && d < MinGenerationRetention {
		return fmt.Errorf("%w: generation_retention: at least %v, got %v", ErrInvalid, MinGenerationRetention, d)
	}
	s.retention.d.Store(int64(d))
	return nil
}

// GenerationRetention is how long generation records are kept.
func (s *LedgerStore) GenerationRetention() time.Duration { return s.retention.get() }

// ExpiredError is the answer for a generation older than the retention: it
// is ErrNotFound to callers that only tell found from not.
type ExpiredError struct {
	ID        string
	Retention time.Duration
}

func (e *ExpiredError) Error() string {
	return fmt.Sprintf("generation %s expired: generations are removed %s after they are created", e.ID, FormatRetention(e.Retention))
}

// Is makes errors.Is(err, ErrNotFound) true.
func (e *ExpiredError) Is(target error) bool { return target == ErrNotFound }

// FormatRetention writes a retention as days when it is whole days, else
// as a Go duration ("30 days", "36h0m0s").
func FormatRetention(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		if n := d / (24 * time.Hour); n == 1 {
			return "1 day"
		} else {
			return strconv.FormatInt(int64(n), 10) + " days"
		}
	}
	return d.String()
}

// expired returns an ExpiredError when the generation id is older than
// the retention at now, else nil.
func (s *LedgerStore) expired(id string) error {
	ms, ok := record.GenerationMillis(id)
	if !ok {
		return nil
	}
	r := s.retention.get()
	if now().UnixMilli() >= ms+r.Milliseconds() {
		return &ExpiredError{ID: id, Retention: r}
	}
	return nil
}

// storedUntil is when the backend deletes a generation created at ms.
func (s *LedgerStore) storedUntil(ms int64) int64 {
	return ms + (s.retention.get() + expiryMargin).Milliseconds()
}

// withExpiry gives the generation kinds their expiry: a generation's from
// the time in its id, an upstream id's from the generation id it holds.
func (s *LedgerStore) withExpiry(kinds []kernel.Kind) []kernel.Kind {
	for i := range kinds {
		switch kinds[i].Prefix {
		case prefixGeneration:
			kinds[i].Expires = func(key string, _ []byte) int64 {
				if ms, ok := record.GenerationMillis(key[len(prefixGeneration):]); ok {
					return s.storedUntil(ms)
				}
				return 0
			}
		case prefixUpstreamID:
			kinds[i].Expires = func(_ string, value []byte) int64 {
				id, err := strconv.Unquote(string(value))
				if err != nil {
					return 0
				}
				if ms, ok := record.GenerationMillis(id); ok {
					return s.storedUntil(ms)
				}
				return 0
			}
		}
	}
	return kinds
}

// ExpiringKinds are the record kinds that expire, with the expiry a store
// whose generation retention is retention gives them: a tool that copies
// records (the migration) passes them, so that the copies expire as the
// gateway's own writes do.
func ExpiringKinds(retention time.Duration) ([]kernel.Kind, error) {
	var s LedgerStore
	if err := s.SetGenerationRetention(retention); err != nil {
		return nil, err
	}
	kinds := s.withExpiry(s.kinds())
	return append(kinds, analytics.New(nil).Kinds()...), nil
}
