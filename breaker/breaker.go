// Package breaker keeps a circuit breaker per provider endpoint (model and
// provider): an endpoint whose calls fail several times in a row is taken
// out of routing for a cooldown (open), then given single probe requests
// (half-open) until one answers (closed again). Routing asks Allow of
// each endpoint; the meter reports each call's outcome (Observe).
//
// A closed breaker costs one atomic load per endpoint routed and per call
// answered. Replicas on a shared database share the endpoints they open
// (Sync), off the request path.
package breaker

import (
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/telemetry"
)

// State is a breaker's state.
type State int32

const (
	// Closed: the endpoint takes every request.
	Closed State = iota
	// HalfOpen: the cooldown is over; one probe request at a time.
	HalfOpen
	// Open: out of routing until the cooldown ends.
	Open
)

func (s State) String() string {
	switch s {
	case HalfOpen:
		return "half_open"
	case Open:
		return "open"
	}
	return "closed"
}

// Defaults of Settings.
const (
	DefaultFailures = 5
	DefaultCooldown = 30 * time.Second
)

// Settings are the thresholds of the gateway's breakers.
type Settings struct {
	// Failures is how many failed calls in a row open an endpoint's
	// breaker; 0: breakers are off.
	Failures int
	// Cooldown is how long an open breaker keeps the endpoint out of
	// routing before a probe; also how long a probe handed out may go
	// unanswered (its request served elsewhere) before another is.
	Cooldown time.Duration
	// Log gets every transition.
	Log *zap.Logger
}

// Breaker is one endpoint's circuit breaker.
type Breaker struct {
	model, provider string

	state    atomic.Int32
	failures atomic.Int32 // failed calls in a row, while closed
	until    atomic.Int64 // open: until when, in Unix nanoseconds
	probe    atomic.Int64 // half-open: when the probe was handed out; 0: none out
	mu       sync.Mutex   // transitions
}

// State is the breaker's state.
func (b *Breaker) State() State {
	if b == nil {
		return Closed
	}
	return State(b.state.Load())
}

// Allow reports whether routing may send a request to the endpoint at
// now: always while closed, never while open, and to one probe at a time
// once the cooldown is over (half-open). A nil Breaker (an endpoint
// outside the catalog) always allows.
func (b *Breaker) Allow(now time.Time, s *Settings) bool {
	if b == nil || s.Failures <= 0 {
		return true
	}
	switch State(b.state.Load()) {
	case Closed:
		return true
	case Open:
		if now.UnixNano() < b.until.Load() {
			return false
		}
		b.transition(Open, HalfOpen, now, s, "cooldown over: probing")
	}
	p := b.probe.Load()
	if p != 0 && now.UnixNano()-p < int64(s.Cooldown) {
		return false
	}
	return b.probe.CompareAndSwap(p, now.UnixNano())
}

// Observe records the outcome of a call to the endpoint: failed when it
// got no answer, timed out or got a server error; else it answered. A
// call the provider refused for the request's sake (a 4xx, a rate limit)
// or that the client abandoned is not observed.
func (b *Breaker) Observe(failed bool, now time.Time, s *Settings) {
	if b == nil || s.Failures <= 0 {
		return
	}
	st := State(b.state.Load())
	if !failed {
		if b.failures.Load() != 0 {
			b.failures.Store(0)
		}
		if st != Closed {
			b.transition(st, Closed, now, s, "the endpoint answered")
		}
		return
	}
	switch st {
	case Closed:
		if int(b.failures.Add(1)) >= s.Failures {
			b.transition(Closed, Open, now, s, "failed calls in a row")
		}
	case HalfOpen:
		b.transition(HalfOpen, Open, now, s, "the probe failed")
	}
}

// transition moves the breaker from from to to, unless another call moved
// it first, and logs and counts it.
func (b *Breaker) transition(from, to State, now time.Time, s *Settings, why string) {
	b.mu.Lock()
	if State(b.state.Load()) != from {
		b.mu.Unlock()
		return
	}
	switch to {
	case Open:
		until := now.Add(s.Cooldown)
		b.until.Store(until.UnixNano())
		opened(b, until)
	case HalfOpen:
		b.probe.Store(0)
	case Closed:
		b.failures.Store(0)
		b.probe.Store(0)
	}
	b.state.Store(int32(to))
	b.mu.Unlock()
	b.report(from, to, s.Log, why)
}

// openUntil opens the breaker until until, as another replica did, unless
// it is already open as long.
func (b *Breaker) openUntil(until, now time.Time, log *zap.Logger) bool {
	if !until.After(now) {
		return false
	}
	b.mu.Lock()
	from := State(b.state.Load())
	if from == Open && b.until.Load() >= until.UnixNano() {
		b.mu.Unlock()
		return false
	}
	b.until.Store(until.UnixNano())
	b.state.Store(int32(Open))
	b.mu.Unlock()
	if from != Open {
		b.report(from, Open, log, "opened by another replica")
	}
	return true
}

func (b *Breaker) report(from, to State, log *zap.Logger, why string) {
	telemetry.BreakerTransition(b.model, b.provider, int(to), to.String())
	if log == nil {
		return
	}
	fields := []zap.Field{zap.String("model", b.model), zap.String("provider", b.provider),
		zap.String("from", from.String()), zap.String("to", to.String()), zap.String("reason", why)}
	if to == Open {
		log.Warn("endpoint circuit breaker opened: out of routing", fields...)
		return
	}
	log.Info("endpoint circuit breaker "+to.String(), fields...)
}

// registry keeps each endpoint's Breaker across catalog reloads.
var registry sync.Map // key -> *Breaker

type key struct{ model, provider string }

// For returns the Breaker of provider serving model, the same on every
// call.
func For(model, provider string) *Breaker {
	k := key{model, provider}
	if b, ok := registry.Load(k); ok {
		return b.(*Breaker)
	}
	b, _ := registry.LoadOrStore(k, &Breaker{model: model, provider: provider})
	return b.(*Breaker)
}
