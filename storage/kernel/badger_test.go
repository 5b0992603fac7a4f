package kernel

import (
	"fmt"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"go.uber.org/zap"
)

// TestBadgerReadsTablesWrittenCompressed: data directories written before
// the kernel turned table compression off (Snappy, Badger's default) stay
// readable, and new tables are written uncompressed beside them.
func TestBadgerReadsTablesWrittenCompressed(t *testing.T) {
	dir := t.TempDir()
	old, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil).WithCompression(options.Snappy))
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	err = old.Update(func(txn *badger.Txn) error {
		for i := range n {
			if err := txn.Set(fmt.Appendf(nil, "old/%03d", i), fmt.Appendf(nil, `"value %d"`, i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = old.Close() // writes the memtable out as a compressed table
	}
	if err != nil {
		t.Fatal(err)
	}

	b, err := openBadgerDB(Options{Dir: dir}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	tables := 0
	for _, ti := range b.db.Tables() {
		if ti.KeyCount > 0 {
			tables++
		}
	}
	if tables == 0 {
		t.Fatal("the old database left no table to read")
	}
	if err := b.Commit([]Write{{Key: "new/1", Value: "fresh"}}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		var got string
		if err := b.Get(fmt.Sprintf("old/%03d", i), func(v []byte) error { got = string(v); return nil }); err != nil {
			t.Fatalf("old/%03d: %v", i, err)
		}
		if want := fmt.Sprintf(`"value %d"`, i); got != want {
			t.Fatalf("old/%03d = %s, want %s", i, got, want)
		}
	}
	if err := b.Get("new/1", func(v []byte) error {
		if string(v) != `"fresh"` {
			t.Errorf("new/1 = %s", v)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
