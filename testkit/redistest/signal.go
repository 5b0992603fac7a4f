package redistest

import "syscall"

// interruptSignal asks redis-server for a clean shutdown.
var interruptSignal = syscall.SIGTERM
