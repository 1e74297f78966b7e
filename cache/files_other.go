//go:build !linux

package cache

import (
	"errors"
	"os"
)

// Page files are Linux's (O_TMPFILE); elsewhere pages are always sent
// from memory, and Entry.File says so before it gets here.

func checkFileDir(string) error { return nil }

func maxPageFiles() int64 { return 0 }

func pageFileOf(string, []byte) (*os.File, error) {
	return nil, errors.New("page files are Linux only")
}
