package storage

import "sync/atomic"

// generationSubscribers is a copy-on-write list, so that Settle reads it
// without a lock.
type generationSubscribers struct {
	list atomic.Pointer[[]*subscriber]
}

type subscriber struct{ fn func(Generation) }

// SubscribeGenerations calls fn with every generation record once it is
// durable (after Settle's commit, outside the store's lock). fn runs on the
// request path, so it must only hand the record on (a bounded queue, an
// in-memory rollup) and never block. The returned cancel removes fn; call it
// when the subscriber's config is cleaned up, since the store outlives a
// config reload.
func (s *LedgerStore) SubscribeGenerations(fn func(Generation)) (cancel func()) {
	sub := &subscriber{fn: fn}
	for {
		old := s.genSubs.list.Load()
		var next []*subscriber
		if old != nil {
			next = append(next, *old...)
		}
		next = append(next, sub)
		if s.genSubs.list.CompareAndSwap(old, &next) {
			break
		}
	}
	return func() {
		for {
			old := s.genSubs.list.Load()
			if old == nil {
				return
			}
			next := make([]*subscriber, 0, len(*old))
			for _, x := range *old {
				if x != sub {
					next = append(next, x)
				}
			}
			if s.genSubs.list.CompareAndSwap(old, &next) {
				return
			}
		}
	}
}

// publish hands g to every subscriber.
func (s *generationSubscribers) publish(g Generation) {
	list := s.list.Load()
	if list == nil {
		return
	}
	for _, sub := range *list {
		sub.fn(g)
	}
}
