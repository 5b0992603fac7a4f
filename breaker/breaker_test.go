package breaker

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestOpensAfterFailuresThenProbes(t *testing.T) {
	s := &Settings{Failures: 3, Cooldown: time.Minute}
	b := &Breaker{model: "m", provider: "p"}
	t0 := time.Unix(1000, 0)
	for i := range 2 {
		b.Observe(true, t0, s)
		if !b.Allow(t0, s) || b.State() != Closed {
			t.Fatalf("failure %d: out of routing before the threshold", i+1)
		}
	}
	// A success in between starts the count again.
	b.Observe(false, t0, s)
	for range 2 {
		b.Observe(true, t0, s)
	}
	if b.State() != Closed {
		t.Fatal("opened without 3 failures in a row")
	}
	b.Observe(true, t0, s)
	if b.State() != Open || b.Allow(t0.Add(59*time.Second), s) {
		t.Fatalf("state %v after 3 failures in a row; open until the cooldown ends", b.State())
	}
	// Cooldown over: one probe, and only one.
	t1 := t0.Add(time.Minute)
	if !b.Allow(t1, s) || b.State() != HalfOpen {
		t.Fatalf("no probe after the cooldown: %v", b.State())
	}
	if b.Allow(t1, s) {
		t.Fatal("a second probe while one is out")
	}
	// The probe fails: open again for a cooldown.
	b.Observe(true, t1, s)
	if b.State() != Open || b.Allow(t1.Add(time.Second), s) {
		t.Fatalf("a failed probe leaves %v", b.State())
	}
	t2 := t1.Add(time.Minute)
	if !b.Allow(t2, s) {
		t.Fatal("no probe after the second cooldown")
	}
	b.Observe(false, t2, s)
	if b.State() != Closed || !b.Allow(t2, s) || !b.Allow(t2, s) {
		t.Fatalf("an answered probe leaves %v", b.State())
	}
}

func TestProbeNotAnsweredIsHandedOutAgain(t *testing.T) {
	s := &Settings{Failures: 1, Cooldown: 10 * time.Second}
	b := &Breaker{}
	t0 := time.Unix(1000, 0)
	b.Observe(true, t0, s)
	t1 := t0.Add(10 * time.Second)
	if !b.Allow(t1, s) {
		t.Fatal("no probe")
	}
	// Its request was served by another endpoint: no outcome. After a
	// cooldown another request probes.
	if b.Allow(t1.Add(9*time.Second), s) {
		t.Fatal("a second probe too soon")
	}
	if !b.Allow(t1.Add(10*time.Second), s) {
		t.Fatal("the unanswered probe was never handed out again")
	}
}

func TestOffAndNil(t *testing.T) {
	var b *Breaker
	s := &Settings{Failures: 1, Cooldown: time.Second}
	b.Observe(true, time.Now(), s)
	if !b.Allow(time.Now(), s) || b.State() != Closed {
		t.Fatal("a nil breaker refuses")
	}
	off := &Settings{}
	nb := &Breaker{}
	for range 10 {
		nb.Observe(true, time.Now(), off)
	}
	if !nb.Allow(time.Now(), off) || nb.State() != Closed {
		t.Fatal("breakers off, yet open")
	}
}

func TestConcurrentProbeIsSingle(t *testing.T) {
	s := &Settings{Failures: 1, Cooldown: time.Second}
	b := &Breaker{}
	t0 := time.Unix(1000, 0)
	b.Observe(true, t0, s)
	t1 := t0.Add(time.Second)
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for range 32 {
		wg.Go(func() {
			if b.Allow(t1, s) {
				mu.Lock()
				allowed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if allowed != 1 {
		t.Fatalf("%d probes at once, want 1", allowed)
	}
}

// memShared is a Shared in memory, as Redis would hold it.
type memShared struct {
	mu sync.Mutex
	m  map[string]int64
}

func (s *memShared) Publish(_ context.Context, opened map[string]int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range opened {
		s.m[k] = max(s.m[k], v)
	}
	return nil
}

func (s *memShared) Read(context.Context) (map[string]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int64, len(s.m))
	for k, v := range s.m {
		out[k] = v
	}
	return out, nil
}

func TestSyncSharesOpens(t *testing.T) {
	sh := &memShared{m: map[string]int64{}}
	s := &Settings{Failures: 1, Cooldown: time.Minute}
	b := For("sync/model", "sync-provider")
	now := time.Now()
	b.Observe(true, now, s)
	if err := syncOnce(context.Background(), sh, now, nil); err != nil {
		t.Fatal(err)
	}
	until, ok := sh.m[Name("sync/model", "sync-provider")]
	if !ok || until != now.Add(time.Minute).UnixMilli() {
		t.Fatalf("published %v %v", until, ok)
	}
	// Another replica's open reaches a closed breaker here.
	other := For("sync/model", "other-provider")
	sh.m[Name("sync/model", "other-provider")] = now.Add(time.Minute).UnixMilli()
	sh.m[Name("unknown/model", "nobody")] = now.Add(time.Minute).UnixMilli()
	if err := syncOnce(context.Background(), sh, now, nil); err != nil {
		t.Fatal(err)
	}
	if other.State() != Open || other.Allow(now, s) {
		t.Fatalf("another replica's open not applied: %v", other.State())
	}
	if _, made := registry.Load(key{"unknown/model", "nobody"}); made {
		t.Fatal("an endpoint outside the catalog got a breaker")
	}
	// An expired entry opens nothing.
	late := For("sync/model", "late-provider")
	sh.m[Name("sync/model", "late-provider")] = now.Add(-time.Second).UnixMilli()
	if err := syncOnce(context.Background(), sh, now, nil); err != nil {
		t.Fatal(err)
	}
	if late.State() != Closed {
		t.Fatal("an expired open applied")
	}
}
