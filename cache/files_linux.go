package cache

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// errMemoryFS: the directory is on tmpfs or ramfs (files.go: sending from
// there measured dearer than writing from the heap).
var errMemoryFS = errors.New("the directory is on tmpfs or ramfs, where sendfile costs more than a write from memory; use a directory on disk")

// checkFileDir tells whether page files can be made in dir: a directory on
// a disk filesystem that takes unnamed files.
func checkFileDir(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	if st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC {
		return errMemoryFS
	}
	f, err := openUnnamed(dir)
	if err != nil {
		return err
	}
	return f.Close()
}

// pageFileOf returns an unnamed file in dir holding b. It has no name, so
// nothing else can open it, and it is freed when closed.
func pageFileOf(dir string, b []byte) (*os.File, error) {
	f, err := openUnnamed(dir)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// maxPageFiles is how many page files may be open at once (files.go).
func maxPageFiles() int64 {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil || r.Cur == unix.RLIM_INFINITY {
		return 1 << 20
	}
	return int64(r.Cur / fileShare)
}

func openUnnamed(dir string) (*os.File, error) {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, &os.PathError{Op: "open O_TMPFILE", Path: dir, Err: err}
	}
	return os.NewFile(uintptr(fd), "page"), nil
}
