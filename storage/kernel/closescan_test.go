package kernel

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"
)

// TestCloseStopsAScanUnderWay: a scan under way when the store closes
// ends at its next record with ErrClosed, Close waits for it (Badger
// panics when it is closed under an iterator), and a scan begun after
// Close is refused.
func TestCloseStopsAScanUnderWay(t *testing.T) {
	b, err := OpenEmbedded(Options{InMemory: true}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	var writes []Write
	for i := range 100 {
		writes = append(writes, Write{Key: fmt.Sprintf("g/%03d", i), Value: "v"})
	}
	if err := b.Commit(writes); err != nil {
		t.Fatal(err)
	}
	k := New(b, zap.NewNop())
	k.Start()

	first, resume := make(chan struct{}), make(chan struct{})
	read := 0
	scanned := make(chan error, 1)
	go func() {
		scanned <- k.Scan("g/", func(_, _ []byte) (bool, error) {
			read++
			if read == 1 {
				close(first)
				<-resume
			}
			return true, nil
		})
	}()
	<-first
	closed := make(chan error, 1)
	go func() { closed <- k.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) under a scan", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(resume)
	if err := <-scanned; !errors.Is(err, ErrClosed) || read != 1 {
		t.Fatalf("the scan: %v after %d records; want ErrClosed after 1", err, read)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := k.Scan("g/", func(_, _ []byte) (bool, error) { return true, nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("a scan after Close: %v", err)
	}
}
