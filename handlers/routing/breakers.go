package routing

import (
	"time"

	"github.com/tollgate-dev/caddy-tollgate/breaker"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
)

// withoutOpen leaves out the endpoints whose circuit breaker keeps them
// out of routing (open, or half-open with its probe out): after the
// filters, before the ranking. The list is copied only when one is left
// out; open reports whether one was.
func (rt *Router) withoutOpen(c []upstream.Attempt) (kept []upstream.Attempt, open bool) {
	if rt.Breakers.Failures <= 0 {
		return c, false
	}
	var now time.Time
	for i, a := range c {
		allowed := true
		if a.Provider.Breaker.State() != breaker.Closed {
			if now.IsZero() {
				now = time.Now()
			}
			allowed = a.Provider.Breaker.Allow(now, &rt.Breakers)
		}
		switch {
		case !allowed && !open:
			open = true
			kept = append(make([]upstream.Attempt, 0, len(c)), c[:i]...)
		case allowed && open:
			kept = append(kept, a)
		}
	}
	if !open {
		return c, false
	}
	return kept, true
}
