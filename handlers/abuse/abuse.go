// Package abuse holds the gateway's abuse ceilings: a token bucket per
// client IP or key, in front of everything else a request meets, kept
// across config reloads.
package abuse

import (
	"fmt"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"golang.org/x/time/rate"
)

// Ceiling is one abuse ceiling: Requests per Window, with bursts up to
// Burst (default: Requests).
type Ceiling struct {
	Requests int64          `json:"requests"`
	Window   caddy.Duration `json:"window"`
	Burst    int            `json:"burst,omitempty"`
}

// Validate checks a ceiling's values, naming the option; nil is off.
func (c *Ceiling) Validate(name string) error {
	switch {
	case c == nil:
		return nil
	case c.Requests <= 0:
		return fmt.Errorf("%s: requests must be a positive integer, got %d", name, c.Requests)
	case c.Window <= 0:
		return fmt.Errorf("%s: window must be a positive duration, got %v", name, time.Duration(c.Window))
	case c.Burst < 0:
		return fmt.Errorf("%s: burst must be a positive integer, got %d", name, c.Burst)
	}
	return nil
}

// ceilingPool keeps the buckets across config reloads: a new config with
// the same ceiling (scope and numbers) takes over the old one's buckets,
// so a reload neither refills a client's bucket nor forgets it.
var ceilingPool = caddy.NewUsagePool()

// Load returns the pooled buckets for c; nil when c is off.
func Load(scope string, c *Ceiling) (*Buckets, error) {
	if c == nil {
		return nil, nil
	}
	key := fmt.Sprintf("%s %d/%d burst %d", scope, c.Requests, c.Window, c.Burst)
	v, _, err := ceilingPool.LoadOrNew(key, func() (caddy.Destructor, error) {
		cs := newBuckets(c)
		if cs == nil {
			return nil, fmt.Errorf("%s: invalid ceiling", scope)
		}
		cs.poolKey = key
		return cs, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*Buckets), nil
}

// Release gives the buckets back to the pool; safe on nil.
func (c *Buckets) Release() {
	if c != nil {
		_, _ = ceilingPool.Delete(c.poolKey)
	}
}

// Destruct implements caddy.Destructor: the buckets are plain memory.
func (c *Buckets) Destruct() error { return nil }

// Buckets holds one token bucket per name (client IP or key hash); buckets
// idle for a while are dropped so that memory follows active clients.
type Buckets struct {
	limit   rate.Limit
	burst   int
	poolKey string

	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// idleAfter is how long an unused bucket is kept; by then it is full again.
const idleAfter = 10 * time.Minute

func newBuckets(c *Ceiling) *Buckets {
	if c == nil || c.Requests <= 0 || c.Window <= 0 {
		return nil
	}
	burst := c.Burst
	if burst <= 0 {
		burst = int(c.Requests)
	}
	return &Buckets{
		limit:   rate.Limit(float64(c.Requests) / time.Duration(c.Window).Seconds()),
		burst:   burst,
		buckets: map[string]*bucket{},
	}
}

// Burst is the most tokens a bucket holds: the limit a refusal reports.
func (c *Buckets) Burst() int { return c.burst }

// Allow takes a token for name at t; when refused it says when the next
// token is due.
func (c *Buckets) Allow(name string, t time.Time) (bool, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.Sub(c.lastSweep) > idleAfter {
		for k, b := range c.buckets {
			if t.Sub(b.seen) > idleAfter {
				delete(c.buckets, k)
			}
		}
		c.lastSweep = t
	}
	b, ok := c.buckets[name]
	if !ok {
		b = &bucket{lim: rate.NewLimiter(c.limit, c.burst)}
		c.buckets[name] = b
	}
	b.seen = t
	if b.lim.AllowN(t, 1) {
		return true, time.Time{}
	}
	r := b.lim.ReserveN(t, 1)
	delay := r.DelayFrom(t)
	r.CancelAt(t)
	return false, t.Add(delay)
}
