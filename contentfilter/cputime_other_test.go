//go:build !unix

package contentfilter

import "time"

func cpuTime() (time.Duration, bool) { return 0, false }
