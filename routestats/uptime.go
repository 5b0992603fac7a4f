package routestats

import (
	"sync"
	"sync/atomic"
	"time"
)

// Uptime windows the endpoints route reports.
const (
	UptimeShort = 5 * time.Minute
	UptimeDay   = 24 * time.Hour
)

// outcomes counts an endpoint's calls that answered and that failed, in
// buckets of one unit (a minute, an hour) each, reused round the ring.
type outcomes struct {
	unit  time.Duration
	mu    sync.Mutex // a bucket's reuse for a later unit
	slots []bucket
}

type bucket struct {
	stamp    atomic.Int64 // the unit counted, since the epoch; 0: never used
	ok, fail atomic.Uint32
}

func (o *outcomes) add(ok bool, at time.Time) {
	u := at.UnixNano() / int64(o.unit)
	b := &o.slots[u%int64(len(o.slots))]
	if b.stamp.Load() != u {
		o.mu.Lock()
		if b.stamp.Load() != u {
			b.ok.Store(0)
			b.fail.Store(0)
			b.stamp.Store(u)
		}
		o.mu.Unlock()
	}
	if ok {
		b.ok.Add(1)
	} else {
		b.fail.Add(1)
	}
}

// count sums the buckets of the units ending within window before now.
func (o *outcomes) count(window time.Duration, now time.Time) (ok, fail uint64) {
	u := now.UnixNano() / int64(o.unit)
	first := u - int64(window/o.unit) + 1
	for i := range o.slots {
		b := &o.slots[i]
		if s := b.stamp.Load(); s >= first && s <= u {
			ok += uint64(b.ok.Load())
			fail += uint64(b.fail.Load())
		}
	}
	return ok, fail
}

// uptime keeps an endpoint's call outcomes by the minute for the last 30
// minutes and by the hour for the last day.
type uptime struct {
	minutes, hours outcomes
}

func newUptime() *uptime {
	return &uptime{
		minutes: outcomes{unit: time.Minute, slots: make([]bucket, int(Window/time.Minute)+1)},
		hours:   outcomes{unit: time.Hour, slots: make([]bucket, int(UptimeDay/time.Hour)+1)},
	}
}

// ObserveOutcome records one call of the endpoint for its uptime: ok when
// it answered, else it failed (no answer, a timeout, a server error). A
// call the provider refused (a rate limit, a bad request) or that the
// client abandoned is neither, and is not recorded.
func (s *Stats) ObserveOutcome(ok bool, at time.Time) {
	if s == nil {
		return
	}
	u := s.uptime.Load()
	if u == nil {
		s.uptime.CompareAndSwap(nil, newUptime())
		u = s.uptime.Load()
	}
	u.minutes.add(ok, at)
	u.hours.add(ok, at)
}

// Uptime is the share of the endpoint's calls within window before now
// (Window, UptimeShort or UptimeDay) that answered, in percent, and how
// many calls it counts; ok is false without any.
func (s *Stats) Uptime(window time.Duration, now time.Time) (percent float64, calls uint64, ok bool) {
	if s == nil {
		return 0, 0, false
	}
	u := s.uptime.Load()
	if u == nil {
		return 0, 0, false
	}
	o := &u.minutes
	if window > Window {
		o = &u.hours
	}
	good, bad := o.count(window, now)
	if good+bad == 0 {
		return 0, 0, false
	}
	return 100 * float64(good) / float64(good+bad), good + bad, true
}

// LowUptime reports whether the endpoint answered less than min percent
// of its calls of the last 30 minutes, over at least MinUptimeCalls of
// them (fewer say little).
func (s *Stats) LowUptime(min float64, now time.Time) bool {
	if min <= 0 {
		return false
	}
	p, n, ok := s.Uptime(Window, now)
	return ok && n >= MinUptimeCalls && p < min
}

// MinUptimeCalls is how many calls within 30 minutes an endpoint's uptime
// needs to rank it.
const MinUptimeCalls = 10
