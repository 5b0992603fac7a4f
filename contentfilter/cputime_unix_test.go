//go:build unix

package contentfilter

import (
	"syscall"
	"time"
)

// cpuTime is the process's user and system CPU time: on a shared machine
// a benchmark's CPU time per operation varies far less than its wall
// time, which counts the time other processes held the cores.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
