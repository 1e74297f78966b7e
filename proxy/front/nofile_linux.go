package front

import "golang.org/x/sys/unix"

// nofileLimit is the process's soft limit on open descriptors
// (RLIMIT_NOFILE); false when there is none or it cannot be read.
func nofileLimit() (uint64, bool) {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil || r.Cur == unix.RLIM_INFINITY {
		return 0, false
	}
	return r.Cur, true
}
