// Package retry is the policy of an attempt retried on the same endpoint
// before the next one is tried: how many retries a request may make, how
// long it may wait in all, and the backoff between them.
package retry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Defaults of a Policy whose fields are zero.
const (
	DefaultAttempts = 2
	DefaultBudget   = 2 * time.Second
	DefaultBackoff  = 200 * time.Millisecond
)

// Policy bounds one request's retries on the same endpoint.
type Policy struct {
	// Attempts is how many retries a request may make in all, over all
	// its endpoints; negative: none.
	Attempts int
	// Budget is the most the retries may add to the request: a retry is
	// made only when its wait and another call as long as the one that
	// failed end within Budget of the request's first failure (else the
	// next endpoint is tried at once). So a quick failure (no connection,
	// a 502) is retried, and a long timeout is not.
	Budget time.Duration
	// Backoff is the wait before the first retry; each further retry of
	// the request waits twice the one before, with jitter (a random part
	// of up to half of it).
	Backoff time.Duration
	// Rand draws the jitter, in [0, 1); nil: math/rand.
	Rand func() float64
}

// WithDefaults is p with the defaults in place of zero fields.
func (p Policy) WithDefaults() Policy {
	if p.Attempts == 0 {
		p.Attempts = DefaultAttempts
	}
	if p.Budget == 0 {
		p.Budget = DefaultBudget
	}
	if p.Backoff == 0 {
		p.Backoff = DefaultBackoff
	}
	return p
}

// State is one request's use of its policy; the zero State has made no
// retry.
type State struct {
	made      int
	firstFail time.Time
}

// Next is the wait before the request's next retry after a call that
// took took and failed at now, and whether a retry fits the policy.
// retryAfter is the provider's own hint (Retry-After; 0: none), which the
// wait honours: a hint beyond what is left of the budget is no short
// pause, and the next endpoint is tried instead.
func (p Policy) Next(s *State, now time.Time, took, retryAfter time.Duration) (time.Duration, bool) {
	if p.Attempts <= 0 || s.made >= p.Attempts {
		return 0, false
	}
	if s.made == 0 {
		s.firstFail = now
	}
	wait := p.Backoff << s.made
	if wait <= 0 || wait > p.Budget { // shifted past any budget
		wait = p.Budget
	}
	draw := p.Rand
	if draw == nil {
		draw = rand.Float64
	}
	wait = wait/2 + time.Duration(draw()*float64(wait/2))
	wait = max(wait, retryAfter)
	if now.Add(wait + max(took, 0)).After(s.firstFail.Add(p.Budget)) {
		return 0, false
	}
	s.made++
	return wait, true
}

// Made is how many retries the request made.
func (s *State) Made() int { return s.made }

// Wait waits d, or less when ctx ends (the client left): false then.
func Wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
