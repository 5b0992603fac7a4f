package analytics

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// The analytics rollup outlives the generation records it counts: an
// hour's sums per account are sealed into one record of their own
// (ah/<account id>/<hour>) once the hour has ended and sealGrace has
// passed, and Open loads those records instead of re-reading the hour's
// generations, which may have expired by then. A generation that settles
// after its hour was sealed (a request longer than sealGrace) writes the
// hour's record again. The sealed records expire after RollupRetention,
// and so do the in-memory cells: the rollup is bounded by accounts ×
// hours of RollupRetention × the distinct dimension values per hour.
// Feedback counts are not sealed: they are counted from the feedback
// records, which do not expire.

// SealedHourPrefix keys the sealed hours' sums.
const SealedHourPrefix = "ah/"

// Once every account's hours before H are sealed, a start need not read
// their generations at all: the record under SealedBeforeKey holds H, and
// Open's scan starts at H's slot (generation ids begin with their
// creation time, which is their CreatedAt), skipping the older records'
// chunks unread. Without it a start read every generation in retention
// (30 days by default) to find the few of the unsealed hours. SealRollup
// raises H in memory before it seals, and from then on a generation of an
// earlier hour (a request that ran longer than sealGrace, a clock set
// back) is sealed as it is counted, its hour's record written again. H is
// stored one SealRollup later, once the records sealed under it, and
// those written again as their generations were counted, are durable.
// (Redis has no slots: a start there reads every generation and skips
// those of sealed hours, as before.)
const SealedBeforeKey = "ah-before"

// sealedBefore is the record under SealedBeforeKey.
type sealedBefore struct {
	Hour int32 `json:"hour"` // hours since the Unix epoch, UTC
}

// loadSealedBefore reads the stored watermark (0: none, as before the
// first seal) into the store and returns it.
func (s *Store) loadSealedBefore() (int32, error) {
	var rec sealedBefore
	err := s.k.Get(SealedBeforeKey, func(v []byte) error { return json.Unmarshal(v, &rec) })
	if err != nil && !errors.Is(err, kernel.ErrNotFound) {
		return 0, fmt.Errorf("the analytics' sealed hours' watermark: %w", err)
	}
	s.sealedBefore, s.sealNext = rec.Hour, rec.Hour
	return rec.Hour, nil
}

// sealGrace is how long after an hour ends its sums are sealed.
const sealGrace = time.Hour

// RollupRetention is how long the analytics rollup keeps an hour's sums.
const RollupRetention = 400 * 24 * time.Hour

// sealEvery is how often the store seals the hours that are due.
const sealEvery = time.Minute

func sealedHourKey(accountID string, hour int32) string {
	return SealedHourPrefix + accountID + "/" + strconv.FormatInt(int64(hour), 10)
}

// sealedHour is the record of an account's sealed hour.
type sealedHour struct {
	AccountID string       `json:"account_id"`
	Hour      int32        `json:"hour"` // hours since the Unix epoch, UTC
	Cells     []sealedCell `json:"cells"`
}

// sealedCell is one cell's dimensions and generation sums.
type sealedCell struct {
	Key              string       `json:"k,omitempty"`
	Model            string       `json:"m,omitempty"`
	Provider         string       `json:"p,omitempty"`
	User             string       `json:"u,omitempty"`
	Workspace        string       `json:"w,omitempty"`
	Status           string       `json:"s,omitempty"`
	BYOK             bool         `json:"b,omitempty"`
	Requests         int64        `json:"n"`
	PromptTokens     int64        `json:"pt,omitempty"`
	CompletionTokens int64        `json:"ct,omitempty"`
	Usage            money.Amount `json:"us,omitempty"`
	BYOKUsage        money.Amount `json:"bu,omitempty"`
	LatencyMS        int64        `json:"l,omitempty"`
	Flagged          int64        `json:"f,omitempty"`
}

// kinds are the analytics' kinds of record: the sealed hours, loaded by
// Build rather than the kernel (they decorate the rollup).
func (s *Store) Kinds() []kernel.Kind {
	return []kernel.Kind{{
		Prefix: SealedBeforeKey,
		Snapshot: func(string) any {
			if s.sealedBefore == 0 {
				return nil
			}
			return sealedBefore{Hour: s.sealedBefore}
		},
	}, {
		Prefix:   SealedHourPrefix,
		Snapshot: s.sealedHourSnapshot,
		Expires: func(key string, _ []byte) int64 {
			_, hour, ok := parseSealedHourKey(key)
			if !ok {
				return 0
			}
			return time.Unix(int64(hour+1)*3600, 0).Add(RollupRetention).UnixMilli()
		},
	}}
}

func parseSealedHourKey(key string) (accountID string, hour int32, ok bool) {
	rest, ok := strings.CutPrefix(key, SealedHourPrefix)
	if !ok {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return "", 0, false
	}
	h, err := strconv.ParseInt(rest[i+1:], 10, 32)
	return rest[:i], int32(h), err == nil
}

// sealedHourSnapshot encodes an account's hour from the rollup for the
// group commit (under the kernel's lock, then the account's).
func (s *Store) sealedHourSnapshot(key string) any {
	accountID, hour, ok := parseSealedHourKey(key)
	if !ok {
		return nil
	}
	a := s.analytics.account(accountID, false)
	if a == nil {
		return nil
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	rec := sealedHour{AccountID: accountID, Hour: hour}
	for _, i := range a.hours[hour] {
		c := &a.cells[i]
		if c.s.Requests == 0 {
			continue // a cell only feedback made
		}
		rec.Cells = append(rec.Cells, sealedCell{
			Key: a.strs[c.k.key], Model: a.strs[c.k.model], Provider: a.strs[c.k.provider], User: a.strs[c.k.user],
			Workspace: a.strs[c.k.workspace], Status: a.strs[c.k.st], BYOK: c.k.byok,
			Requests: c.s.Requests, PromptTokens: c.s.PromptTokens, CompletionTokens: c.s.CompletionTokens,
			Usage: c.s.Usage, BYOKUsage: c.s.BYOKUsage, LatencyMS: c.s.LatencyMS, Flagged: c.s.Flagged,
		})
	}
	if len(rec.Cells) == 0 {
		return nil
	}
	return rec
}

// loadSealedHours fills the rollup with the sealed hours' sums (at Open,
// before the generations of the other hours).
func (s *Store) loadSealedHours() error {
	oldest := hourOf(s.now().Add(-RollupRetention))
	return s.k.Scan(SealedHourPrefix, func(key, v []byte) (bool, error) {
		var rec sealedHour
		if err := json.Unmarshal(v, &rec); err != nil {
			return false, fmt.Errorf("sealed analytics hour %q: %w", key, err)
		}
		if rec.Hour < oldest {
			return true, nil
		}
		a := s.analytics.account(rec.AccountID, true)
		at := time.Unix(int64(rec.Hour)*3600, 0).UTC()
		a.mu.Lock()
		a.sealed[rec.Hour] = true
		for _, c := range rec.Cells {
			a.addCell(record.GenerationDims{KeyHash: c.Key, Model: c.Model, Provider: c.Provider, User: c.User,
				WorkspaceID: c.Workspace, Status: c.Status, BYOK: c.BYOK, CreatedAt: at},
				Sums{Requests: c.Requests, PromptTokens: c.PromptTokens, CompletionTokens: c.CompletionTokens,
					Usage: c.Usage, BYOKUsage: c.BYOKUsage, LatencyMS: c.LatencyMS, Flagged: c.Flagged})
		}
		a.mu.Unlock()
		for _, c := range rec.Cells {
			s.EndUsers.EnsureEndUser(rec.AccountID, c.User, at)
		}
		return true, nil
	})
}

// isSealed reports whether the account's hour is sealed.
func (r *rollup) isSealed(accountID string, hour int32) bool {
	a := r.account(accountID, false)
	if a == nil {
		return false
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.sealed[hour]
}

// SealRollup seals every account's hours that ended sealGrace before t,
// drops the hours older than RollupRetention, and returns once the sealed
// records are durable. The store runs it every sealEvery; tests call it
// with their own clock.
func (s *Store) SealRollup(t time.Time) error {
	last := hourOf(t.Add(-sealGrace)) - 1 // the last hour to seal
	oldest := hourOf(t.Add(-RollupRetention))
	if s.analytics.sealedBefore.Load() < last+1 {
		s.analytics.sealedBefore.Store(last + 1) // before any account is sealed
	}
	var keys []string
	s.analytics.mu.RLock()
	accounts := make(map[string]*acctRollup, len(s.analytics.accounts))
	for id, a := range s.analytics.accounts {
		accounts[id] = a
	}
	s.analytics.mu.RUnlock()
	for id, a := range accounts {
		a.mu.Lock()
		for h := range a.unsealed {
			if h <= last {
				delete(a.unsealed, h)
				a.sealed[h] = true
				keys = append(keys, sealedHourKey(id, h))
			}
		}
		a.dropBefore(oldest)
		a.mu.Unlock()
	}
	s.k.Lock()
	var b *kernel.Batch
	for _, k := range keys {
		b = s.k.MarkDirty(k)
	}
	// The watermark of the previous call that sealed durably: the hours
	// before it were sealed then, and the records written again since for
	// their late generations went into earlier batches.
	if s.sealNext > s.sealedBefore {
		s.sealedBefore = s.sealNext
		b = s.k.MarkDirty(SealedBeforeKey)
	}
	next := s.analytics.sealedBefore.Load()
	s.k.Unlock()
	if b != nil {
		if err := b.Wait(); err != nil {
			return err
		}
	}
	s.k.Lock()
	s.sealNext = max(s.sealNext, next)
	s.k.Unlock()
	return nil
}

// dropBefore removes the cells of hours before oldest, rebuilding the
// account's index and end-user totals when there are any. Callers hold
// a.mu for writing.
func (a *acctRollup) dropBefore(oldest int32) {
	drop := false
	for h := range a.hours {
		if h < oldest {
			drop = true
			break
		}
	}
	if !drop {
		return
	}
	cells := a.cells
	a.cells, a.index, a.hours, a.users, a.lastCell = nil, map[cellKey]int32{}, map[int32][]int32{}, map[string]*Sums{}, -1
	for h := range a.sealed {
		if h < oldest {
			delete(a.sealed, h)
		}
	}
	for h := range a.unsealed {
		if h < oldest {
			delete(a.unsealed, h)
		}
	}
	for _, c := range cells {
		if c.k.hour < oldest {
			continue
		}
		i := int32(len(a.cells))
		a.cells = append(a.cells, c)
		a.index[c.k] = i
		a.hours[c.k.hour] = append(a.hours[c.k.hour], i)
		if u := a.strs[c.k.user]; u != "" {
			t := a.users[u]
			if t == nil {
				t = &Sums{}
				a.users[u] = t
			}
			t.Add(c.s)
		}
	}
}

// sealer runs SealRollup every sealEvery until stop is closed.
type sealer struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func (s *Store) StartSealing(log *zap.Logger) {
	s.seal = &sealer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.seal.done)
		t := time.NewTicker(sealEvery)
		defer t.Stop()
		for {
			// The wall clock, not the store's: tests replace that one
			// and call SealRollup themselves.
			if err := s.SealRollup(time.Now()); err != nil {
				log.Warn("sealing the analytics rollup's hours failed; retrying", zap.Error(err))
			}
			select {
			case <-s.seal.stop:
				return
			case <-t.C:
			}
		}
	}()
}

func (s *Store) StopSealing() {
	if s.seal == nil {
		return
	}
	s.seal.once.Do(func() { close(s.seal.stop) })
	<-s.seal.done
}

// ForgetWatermark deletes the stored watermark of the sealed hours, so
// that the next Build reads the generations as a store written before
// there was one (tests of that start).
func (s *Store) ForgetWatermark() *kernel.Batch {
	s.k.Lock()
	defer s.k.Unlock()
	s.sealedBefore, s.sealNext = 0, 0
	return s.k.MarkDirty(SealedBeforeKey) // gone: its Snapshot is nil
}
