package sticky

import (
	"context"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/storage/affinity"
	"github.com/tollgate-dev/caddy-tollgate/telemetry"
)

// DefaultIdle is how long a conversation stays on its endpoint without
// a request, unless the operator sets sticky_idle: longer than the
// providers' shortest prompt cache (5 minutes) plus a turn's think time.
const DefaultIdle = 10 * time.Minute

// Choice is a request's part of sticky routing, in its state.
type Choice struct {
	// SessionID is the request's session id (SessionID); "" when it has
	// none.
	SessionID string

	table affinity.Table // nil: the request is not sticky
	key   affinity.Key
	idle  time.Duration
	model string // the model the key is of
	stuck string // the endpoint the table named; "" none
}

// Stick reads the endpoint the conversation of key sticks to in table
// and, when it is one of run (model's leading run of equally ranked
// endpoints, those that passed every filter and guardrail), moves it to
// the run's front, the others keeping their order. The stickiness is
// renewed to idle from now. Counted as a hit when the endpoint was
// there, else a miss.
func (c *Choice) Stick(ctx context.Context, table affinity.Table, key affinity.Key, idle time.Duration, model string, run []upstream.Attempt) {
	c.table, c.key, c.idle, c.model = table, key, idle, model
	name, ok := table.Get(ctx, key, idle)
	if ok {
		for i := range run {
			if run[i].Provider.Name == name {
				a := run[i]
				copy(run[1:i+1], run[:i])
				run[0] = a
				c.stuck = name
				telemetry.StickyRouting(true)
				return
			}
		}
	}
	telemetry.StickyRouting(false)
}

// Served records that endpoint (a provider's name) answered the request
// with model: the conversation sticks to it from now on, whether it was
// the one stuck to, a fallback after it failed, or the first to serve.
// A fallback model's endpoint is not the key's model's: it records
// nothing.
func (c *Choice) Served(model, endpoint string) {
	if c.table == nil || endpoint == c.stuck || model != c.model {
		return // not sticky, already stuck to it (Get renewed it), or another model
	}
	c.table.Set(c.key, endpoint, c.idle)
}

// Endpoint is the endpoint the request stuck to; "" when none.
func (c *Choice) Endpoint() string { return c.stuck }
