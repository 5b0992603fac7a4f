package telemetry

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Per-key metrics are off unless the operator sets metrics_per_key: a
// label per key grows with the customers, so it is bounded. The first
// keyBound keys charged get their own series; later ones share the
// account="other", key="other" series, whose growth tells the operator
// the bound is too low.
var (
	keyBound atomic.Int64
	keyMu    sync.Mutex
	keyMap   atomic.Pointer[map[string]*keySeries]
)

// keySeries is one key's resolved children.
type keySeries struct {
	requests prometheus.Counter
	credits  *amountChild
	byok     *amountChild
}

// SetKeyBound sets the number of keys that get their own series; 0 turns
// the per-key metrics off. The running config sets it when it starts.
func SetKeyBound(n int) { keyBound.Store(int64(max(n, 0))) }

// KeyCharged counts a settled request of a key: one request, and its
// charge in nano-credits (credits against the balance, byok the BYOK
// usage). It does nothing unless metrics_per_key is set.
func KeyCharged(account, keyHash string, credits, byok int64) {
	bound := keyBound.Load()
	if bound == 0 {
		return
	}
	k := keyFor(account, keyHash, bound)
	k.requests.Inc()
	k.credits.add(credits)
	k.byok.add(byok)
}

// keyFor returns the key's series, adding it while under bound.
func keyFor(account, keyHash string, bound int64) *keySeries {
	if m := keyMap.Load(); m != nil {
		if k := (*m)[keyHash]; k != nil {
			return k
		}
	}
	keyMu.Lock()
	defer keyMu.Unlock()
	var old map[string]*keySeries
	if p := keyMap.Load(); p != nil {
		old = *p
	}
	if k := old[keyHash]; k != nil {
		return k
	}
	if int64(len(old)) >= bound {
		// The map may hold "other" itself: it counts toward nothing.
		account, keyHash = Other, Other
		if k := old[Other]; k != nil {
			return k
		}
	}
	k := &keySeries{
		requests: std.keyRequests.WithLabelValues(account, keyHash),
		credits:  std.keyCredits.with(account, keyHash, "false"),
		byok:     std.keyCredits.with(account, keyHash, "true"),
	}
	m := make(map[string]*keySeries, len(old)+1)
	for kk, v := range old {
		m[kk] = v
	}
	m[keyHash] = k
	keyMap.Store(&m)
	return k
}
