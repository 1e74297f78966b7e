package cache

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
)

// Page files. An answer over plain HTTP/1.1 can hand a large page to the
// kernel with sendfile(2) instead of writing it from the heap, sparing a
// copy into socket buffers; on a small page the extra system call costs
// more than that (docs/BENCHMARKS.md), hence sendfile_min_bytes. The copy
// lives in an unnamed file (O_TMPFILE) in sendfile_dir, on a disk
// filesystem (tmpfs holds it in small pages, which sendfile moves dearly),
// charged to the store like a form, as nginx sends its cache files. The
// heap bytes stay the page for HTTP/2, TLS, HEAD and the shared tier.
//
// A file holds a descriptor: page files keep to a quarter of RLIMIT_NOFILE,
// leaving the rest to connections. It is closed when its entry leaves the
// store (ristretto's OnExit, store.go), not when the collector finds the
// entry, whose file bytes pace no collection; runtime.AddCleanup closes
// what that misses. An answer sending a file holds it open (SyscallConn's
// Control); one that finds it closed sends the heap bytes instead.

// pageFile is the file of one form of an entry.
type pageFile struct {
	once sync.Once
	h    *fileHandle // written once, inside once; nil: no file
}

// fileHandle is an open page file. It is apart from the Entry so that the
// cleanup that closes it when the entry is collected does not keep the
// entry alive.
type fileHandle struct {
	f      *os.File
	size   int64 // bytes charged: the form's length in whole pages
	closed atomic.Bool
	k      *counters
}

func (h *fileHandle) close() {
	if h.closed.CompareAndSwap(false, true) {
		_ = h.f.Close()
		h.k.files.Add(-1)
		h.k.fileBytes.Add(-h.size)
	}
}

// File returns a file holding the identity form of the page (gzip false)
// or its gzip form, made on the first call, or nil: the form's length is
// outside the sendfile bounds, page files are off, the entry is not
// stored, or the file could not be made (logged). Send it under its
// SyscallConn's Control, which fails once the entry has left the store
// (send Body or GzipBody then). Never write to it or move its offset:
// every answer reads it at explicit offsets.
func (e *Entry) File(gzip bool) *os.File {
	if e.home == nil || runtime.GOOS != "linux" {
		return nil
	}
	body, pf := e.Body(), &e.idFile
	if gzip {
		body, pf = e.GzipBody(), &e.gzFile
	}
	s := e.c.cfg.Load()
	if s.fileMin < 0 || len(body) < s.fileMin || (s.fileMax >= 0 && len(body) > s.fileMax) {
		return nil
	}
	if e.c.stats.files.Load() >= e.c.maxFiles {
		// Descriptors are for connections first. Not inside the Once:
		// the page may get its file once others have closed.
		return nil
	}
	var made bool
	pf.once.Do(func() {
		f, err := pageFileOf(s.fileDir, body)
		if err != nil {
			// Once at warning level: a full disk would fail every page.
			level := slog.LevelDebug
			if e.c.fileErrLogged.CompareAndSwap(false, true) {
				level = slog.LevelWarn
			}
			e.c.log.Log(context.Background(), level, "cache: a page file could not be made; the page is sent from memory", "dir", s.fileDir, "error", err)
			return
		}
		h := &fileHandle{f: f, size: pageRound(int64(len(body))), k: &e.c.stats}
		h.k.files.Add(1)
		h.k.fileBytes.Add(h.size)
		runtime.AddCleanup(e, (*fileHandle).close, h)
		pf.h, made = h, true
	})
	if pf.h == nil || pf.h.closed.Load() {
		return nil
	}
	if made {
		// Outside the Once: charging takes the store's lock of the key,
		// and the store's OnExit may be waiting on this Once (closeFiles).
		e.charge(pf.h.size)
	}
	return pf.h.f
}

// closeFiles closes the entry's files and keeps new ones from being made:
// it has left the store. A file being made is waited for, then closed.
func (e *Entry) closeFiles() {
	for _, pf := range [...]*pageFile{&e.idFile, &e.gzFile} {
		pf.once.Do(func() {})
		if pf.h != nil {
			pf.h.close()
		}
	}
}

// pageRound rounds n up to whole memory pages, what the page cache holds.
func pageRound(n int64) int64 {
	const page = 4096
	return (n + page - 1) &^ (page - 1)
}

// fileShare is the share of the process's descriptor limit that page
// files may hold: the rest is for connections, to clients and upstream.
const fileShare = 4

// fileSettings checks the page files' directory of s, turning page files
// off in s (with a log line) when it cannot hold them.
func (c *Cache) fileSettings(s *settings) {
	if s.fileMin < 0 {
		return
	}
	if err := checkFileDir(s.fileDir); err != nil {
		c.log.Warn("cache: page files off; large pages are sent from memory", "dir", s.fileDir, "error", err)
		s.fileMin = -1
	}
}
