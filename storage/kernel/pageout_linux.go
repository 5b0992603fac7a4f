package kernel

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Badger writes its value log through a shared memory mapping of each
// .vlog file (up to twice ValueLogFileSize) and keeps the mapping for
// reads. Every page written stays resident in the process until the
// kernel needs the memory: with one generation record per request, the
// gateway's RSS grew by about 570 bytes a request (250 MB over 450,000
// requests in bench/run.sh's memory mode), though nothing reads those
// pages again but a GET /generation or value-log GC. pageOut hands the
// written pages back every pageOutEvery: msync writes the dirty ones out
// (as the kernel's writeback would within half a minute), then
// MADV_PAGEOUT drops them from the process and the page cache. A page
// read again faults back in from the file.
//
// Both calls only take addresses (from /proc/self/maps), never touch the
// memory, and cannot harm whatever a race may have mapped there instead
// (a value-log file unmapped by GC or moved by rotation's mremap):
// msync and MADV_PAGEOUT neither change nor discard data.

// pageOutEvery bounds the value log's resident part to about the pages
// written in one period (a few MB a second at full load).
const pageOutEvery = 5 * time.Second

// madvPageout is Linux's MADV_PAGEOUT (5.4 and later; earlier kernels
// refuse it with EINVAL and keep the pages).
const madvPageout = 21

// pageOutLoop runs pageOut over dir's value-log mappings until stop closes.
func pageOutLoop(dir string, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	abs, err := filepath.Abs(dir)
	if err != nil {
		return
	}
	t := time.NewTicker(pageOutEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if !pageOut(abs) {
				return // the kernel has no MADV_PAGEOUT: nothing to do
			}
		}
	}
}

// pageOutDir runs pageOut once over dir's value-log mappings: after the
// warm-up, which read every loaded record through them.
func pageOutDir(dir string) {
	if abs, err := filepath.Abs(dir); err == nil {
		pageOut(abs)
	}
}

// pageOut writes out and releases the resident pages of the .vlog files
// in dir the process maps. It reports false when the kernel refuses
// MADV_PAGEOUT.
func pageOut(dir string) bool {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return true
	}
	for _, m := range vlogMappings(maps, dir) {
		_, _, _ = syscall.Syscall(syscall.SYS_MSYNC, m.start, m.end-m.start, syscall.MS_SYNC) // a hint: MADV_PAGEOUT below decides, and a failure only keeps pages in memory
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, m.start, m.end-m.start, madvPageout); errno == syscall.EINVAL {
			return false
		}
	}
	return true
}

// mapping is an address range of /proc/self/maps.
type mapping struct{ start, end uintptr }

// vlogMappings are the ranges of maps (the text of /proc/self/maps) that
// map a .vlog file directly in dir.
func vlogMappings(maps []byte, dir string) []mapping {
	var out []mapping
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		// address perms offset dev inode path; a deleted file's path
		// ends in " (deleted)".
		line := sc.Bytes()
		i := bytes.IndexByte(line, '/')
		if i < 0 {
			continue
		}
		path := string(line[i:])
		if !strings.HasSuffix(path, ".vlog") || filepath.Dir(path) != dir {
			continue
		}
		addr, _, _ := bytes.Cut(line, []byte(" "))
		lo, hi, ok := bytes.Cut(addr, []byte("-"))
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(string(lo), 16, 64)
		end, err2 := strconv.ParseUint(string(hi), 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		out = append(out, mapping{uintptr(start), uintptr(end)})
	}
	return out
}
