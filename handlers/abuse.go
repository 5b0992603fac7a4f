package handlers

import (
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"golang.org/x/time/rate"
)

// RateCeiling is one abuse ceiling: Requests per Window, with bursts up to
// Burst (default: Requests).
type RateCeiling struct {
	Requests int64          `json:"requests"`
	Window   caddy.Duration `json:"window"`
	Burst    int            `json:"burst,omitempty"`
}

// ceilings holds one token bucket per name (client IP or key hash); buckets
// idle for a while are dropped so that memory follows active clients.
type ceilings struct {
	limit rate.Limit
	burst int

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

func newCeilings(c *RateCeiling) *ceilings {
	if c == nil || c.Requests <= 0 || c.Window <= 0 {
		return nil
	}
	burst := c.Burst
	if burst <= 0 {
		burst = int(c.Requests)
	}
	return &ceilings{
		limit:   rate.Limit(float64(c.Requests) / time.Duration(c.Window).Seconds()),
		burst:   burst,
		buckets: map[string]*bucket{},
	}
}

// allow takes a token for name at t; when refused it says when the next
// token is due.
func (c *ceilings) allow(name string, t time.Time) (bool, time.Time) {
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
