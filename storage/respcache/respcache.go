// Package respcache keeps the response cache's entries: answers stored
// under a key that names the tenant they belong to (its scope: an account
// or a workspace), the model and a hash of the request. One node keeps
// them in memory (Memory), bounded by bytes and expiring; replicas share
// them in Redis (Redis), so a hit at one replica can serve a miss stored
// at another. An entry is opaque here: the handler seals it before it is
// stored.
package respcache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Key names an entry.
type Key struct {
	// Scope is the tenant the entry belongs to: an account's or a
	// workspace's id. No lookup ever crosses scopes.
	Scope string
	// Model is the model the entry answers, as the catalog names it.
	Model string
	// Hash is the hash of the request the entry answers.
	Hash [32]byte
}

// Table is where the entries are kept.
type Table interface {
	// Get is the entry stored under k; false when none (never stored,
	// expired, evicted, or the table could not be read: a miss).
	Get(ctx context.Context, k Key) ([]byte, bool)
	// Set stores entry under k for ttl. It does not wait on the network:
	// a shared table writes in the background, and a failed write only
	// loses the entry.
	Set(k Key, entry []byte, ttl time.Duration)
	// Purge removes the entries of scope, of model ("" for every model),
	// and counts them.
	Purge(ctx context.Context, scope, model string) (int, error)
}

// Observer is told what the table drops on its own: entries evicted
// for room, and the bytes it holds.
type Observer interface {
	Evicted(n int)
	Bytes(delta int64)
}

// nameHash is a fixed-width, glob-free name of s: a scope or a model in a
// shared table's key names, so that they can be matched by a pattern.
func nameHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}
