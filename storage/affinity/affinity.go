// Package affinity keeps which endpoint each conversation sticks to, for
// sticky routing: a table of fixed-size keys, each naming an endpoint
// until it has gone unused for an idle expiry. One node keeps it in
// memory (Memory); replicas share it in Redis (Redis), so a conversation
// spread over replicas by a load balancer stays on one endpoint.
package affinity

import (
	"context"
	"encoding/hex"
	"time"
)

// Key identifies a conversation: a hash of what the router keys it by
// (the account, the model, a session id or the conversation's stable
// prefix). Fixed-size, so the table's memory per entry is bounded
// whatever the client sends.
type Key [16]byte

// String is the key in hex, as Redis stores it.
func (k Key) String() string { return hex.EncodeToString(k[:]) }

// Table is where the sticky endpoints are kept.
type Table interface {
	// Get is the endpoint key sticks to, its idle expiry renewed to idle
	// from now; false when none (never set, expired, or the table could
	// not be read: routing then goes on without it).
	Get(ctx context.Context, key Key, idle time.Duration) (endpoint string, ok bool)
	// Set makes key stick to endpoint for idle from now. It does not
	// wait on the network: a shared table writes in the background, and a
	// failed write only loses the stickiness.
	Set(key Key, endpoint string, idle time.Duration)
}
