package kernel

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/zap"
)

// TestPageOutReleasesValueLog: the value log's pages a commit wrote are
// resident until pageOut hands them back, and read back intact after.
func TestPageOutReleasesValueLog(t *testing.T) {
	dir := t.TempDir()
	if onTmpfs(dir) {
		// A tmpfs's pages are memory, which MADV_PAGEOUT cannot drop
		// without swap: use the source tree's disk instead.
		d, err := os.MkdirTemp(".", "pageout-test-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		dir = d
	}
	if onTmpfs(dir) {
		// Not a skip: a run that cannot test the page-out must not pass.
		t.Fatal("both TMPDIR and the source tree are on a tmpfs: this test needs a disk-backed directory (set TMPDIR to one)")
	}
	b, err := openBadgerDB(Options{Dir: dir}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	// 8 MB of values above valueThreshold: they go to the value log.
	value := `"` + strings.Repeat("x", 4000) + `"`
	for batch := range 20 {
		var ws []Write
		for i := range 100 {
			ws = append(ws, Write{Key: fmt.Sprintf("v/%02d/%03d", batch, i), Value: rawValue(value)})
		}
		if err := b.Commit(ws); err != nil {
			t.Fatal(err)
		}
	}
	abs, _ := filepath.Abs(dir)
	before := vlogResidentKB(t, abs)
	if before < 4<<10 {
		t.Fatalf("the value log holds %d kB resident after 8 MB of writes; want the writes resident", before)
	}
	if !pageOut(abs) {
		t.Fatal("the kernel refused MADV_PAGEOUT")
	}
	after := vlogResidentKB(t, abs)
	if after > before/4 {
		t.Fatalf("resident value log: %d kB before pageOut, %d kB after", before, after)
	}
	for _, key := range []string{"v/00/000", "v/19/099"} {
		var got []byte
		if err := b.Get(key, func(v []byte) error { got = append([]byte(nil), v...); return nil }); err != nil {
			t.Fatal(err)
		}
		if string(got) != value {
			t.Fatalf("%s: read back %d bytes, want the value written", key, len(got))
		}
	}
	t.Logf("value log resident: %d kB before pageOut, %d kB after", before, after)
}

// vlogResidentKB is the resident size of the process's mappings of dir's
// .vlog files, from /proc/self/smaps.
func vlogResidentKB(t *testing.T, dir string) int {
	t.Helper()
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	total, in := 0, false
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) > 0 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			i := strings.IndexByte(line, '/')
			in = i >= 0 && strings.HasSuffix(line, ".vlog") && filepath.Dir(line[i:]) == dir
			continue
		}
		if v, ok := strings.CutPrefix(line, "Rss:"); ok && in {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			total += kb
		}
	}
	return total
}

func TestVlogMappings(t *testing.T) {
	maps := []byte(`55d4c0a00000-55d4c0c00000 r--p 00000000 08:01 123 /usr/bin/caddy
7f0000000000-7f0080000000 rw-s 00000000 08:01 456 /data/tg/000001.vlog
7f0080000000-7f0080100000 rw-s 00000000 08:01 457 /data/tg/00001.mem
7f0090000000-7f0091000000 rw-s 00000000 08:01 458 /data/tg/000002.vlog (deleted)
7f00a0000000-7f00a1000000 rw-s 00000000 08:01 459 /data/other/000001.vlog
7f00b0000000-7f00b1000000 rw-s 00000000 08:01 460 /data/tg/000003.vlog
7f00c0000000-7f00c1000000 rw-p 00000000 00:00 0
`)
	got := vlogMappings(maps, "/data/tg")
	want := []mapping{{0x7f0000000000, 0x7f0080000000}, {0x7f00b0000000, 0x7f00b1000000}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %x, want %x", got, want)
	}
}

// onTmpfs reports whether dir is on a tmpfs.
func onTmpfs(dir string) bool {
	var fs syscall.Statfs_t
	return syscall.Statfs(dir, &fs) == nil && fs.Type == 0x01021994
}
