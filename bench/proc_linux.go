package main

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// groupAttr puts a child in a process group of its own, killed with the
// orchestrator if that dies first.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalGroup sends sig to the child's process group.
func (p *proc) signalGroup(sig syscall.Signal) { _ = syscall.Kill(-p.pid(), sig) }

// raiseFileLimit sets the soft limit on open files to the hard one and
// returns it. Set explicitly, it is what the children inherit: Go raises
// its own soft limit at start but gives children the one it found.
func raiseFileLimit() (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	l.Cur = l.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	return l.Cur, nil
}

// fsType names the file system dir is on, for the run's header: nginx's
// cache files are made there, and what a file's creation costs nginx on a
// miss is the file system's (most of its miss on a busy ext4, measured in
// docs/BENCHMARKS.md), not nginx's.
func fsType(dir string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return "unknown (" + err.Error() + ")"
	}
	switch st.Type {
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.RAMFS_MAGIC:
		return "ramfs"
	case unix.EXT4_SUPER_MAGIC:
		return "ext4" // or ext2/ext3, which share the magic
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlayfs"
	}
	return fmt.Sprintf("type %#x", st.Type)
}
