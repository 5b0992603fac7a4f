package kernel

import (
	"context"
	"time"
)

// Feed is how a kernel learns of other replicas' changes: the change feed
// of a shared backend (RedisBackend), or, on an embedded one, a feed that
// never changes (this process is the only writer). The store chooses it
// once when it opens (Kernel.Feed) and never asks which backend it runs on.
type Feed interface {
	// Shared reports whether other processes write the same database.
	Shared() bool
	// Position is where Follow starts: taken before the warm-up Load, so
	// that nothing committed meanwhile is missed.
	Position() (string, error)
	// Follow gives other replicas' changes after position from to h until
	// ctx ends (see RedisBackend.Follow); on an embedded backend it
	// returns at once.
	Follow(ctx context.Context, from string, h FeedHandler)
	// Available reports whether the database answers right now.
	Available() bool
	// Synced reports whether memory provably holds every change the feed
	// announced (see RedisBackend.Synced).
	Synced() bool
	// GetValues reads the current values of records the feed announced,
	// nil for one deleted; GetMany calls fn for each of keys present.
	GetValues(keys []string) ([][]byte, error)
	GetMany(keys []string, fn func(key string, value []byte)) error
}

// Claimer is a backend several replicas share, on which one of them can
// own a name: the first to claim it, until ttl passes. On a backend only
// this process writes, the kernel's lock decides instead.
type Claimer interface {
	Claim(name string, ttl time.Duration) (bool, error)
}

// Claimer is the backend's, when it is shared.
func (k *Kernel) Claimer() (Claimer, bool) {
	c, ok := k.backend.(Claimer)
	return c, ok
}

// Feed is the backend's change feed: its own when it has one, else one
// that never changes.
func (k *Kernel) Feed() Feed {
	if f, ok := k.backend.(Feed); ok {
		return f
	}
	return localFeed{}
}

// localFeed is the feed of a database only this process writes.
type localFeed struct{}

func (localFeed) Shared() bool                                { return false }
func (localFeed) Position() (string, error)                   { return "", nil }
func (localFeed) Follow(context.Context, string, FeedHandler) {}
func (localFeed) Available() bool                             { return true }
func (localFeed) Synced() bool                                { return true }
func (localFeed) GetValues(keys []string) ([][]byte, error)   { return make([][]byte, len(keys)), nil }
func (localFeed) GetMany([]string, func(string, []byte)) error {
	return nil
}

var (
	_ Feed    = localFeed{}
	_ Feed    = (*RedisBackend)(nil)
	_ Claimer = (*RedisBackend)(nil)
)

// Shared: several replicas write one Redis.
func (b *RedisBackend) Shared() bool { return true }

// Position is FeedPosition.
func (b *RedisBackend) Position() (string, error) { return b.FeedPosition() }
