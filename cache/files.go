package cache

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
)

// Page files. An answer over plain HTTP/1.1 can hand a page to the kernel
// with sendfile(2) instead of writing it from the heap: the kernel then
// sends the file's pages from its page cache as they are, where a write
// first copies the page into socket buffers. On a large page that copy is
// much of the answer's CPU; on a small one the extra system call costs
// more than the copy saves (docs/BENCHMARKS.md). So a form of a page of
// at least sendfile_min_bytes gets, on the first answer that asks for it,
// a copy in an unnamed file (O_TMPFILE) in sendfile_dir, charged to the
// store like a form (forms.go). This is how nginx sends its cache files.
// Nothing else changes: the bytes on the heap stay the page, for HTTP/2,
// TLS, HEAD, If-None-Match and the shared tier.
//
// The directory must be on a disk filesystem: the page cache there holds
// a file in large folios, which sendfile moves cheaply. tmpfs (and a
// memfd, which is tmpfs) usually holds it in 4 KiB pages, and sending
// from it measured dearer than writing from the heap; such a directory
// turns page files off, with a log line (files_linux.go).
//
// Each file holds a descriptor. The store's bound already limits them to
// max_bytes / sendfile_min_bytes; they are also kept to a quarter of the
// process's limit on descriptors (RLIMIT_NOFILE, which Go raises to its
// hard limit at start), so that a low limit leaves room for connections:
// past it, pages are sent from memory.
//
// Lifetime. A file is closed, and its unnamed inode freed, when its entry
// leaves the store (evicted, expired, replaced, dropped, refused, or the
// store closed: ristretto's OnExit, store.go), not when the garbage
// collector finds the entry: its bytes are outside the Go heap, so no
// collection would be paced by them. The collector only closes what that
// missed (runtime.AddCleanup). An answer sending a file holds a reference
// to it (os.File's SyscallConn Control), so close(2) waits for that answer
// to end; an answer that finds the file closed sends the form's bytes from
// the heap instead.

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
// or its gzip form, made on the first call, or nil: the form is shorter
// than sendfile_min_bytes or longer than sendfile_max_bytes, page files
// are off, the entry is not stored, or the file could not be made
// (logged).
//
// Send it under its SyscallConn's Control, which keeps it open while the
// answer lasts; Control fails once the entry has left the store, and the
// caller then sends the form's bytes (Body, GzipBody) instead. Never write
// to it or move its offset: every answer reads it at explicit offsets.
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
