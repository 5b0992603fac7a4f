//go:build !linux

package kernel

// pageOutLoop does nothing but on Linux, where it hands the value log's
// written pages back.
func pageOutLoop(_ string, _ <-chan struct{}, done chan<- struct{}) { close(done) }

// pageOutDir does nothing but on Linux.
func pageOutDir(string) {}
