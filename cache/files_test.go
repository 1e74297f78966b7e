//go:build linux

package cache

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"tradergate/internal/testkit"
)

// fileBytes reads a page file at explicit offsets, as an answer does,
// without moving its offset.
func fileBytes(t *testing.T, f *os.File, n int) []byte {
	t.Helper()
	b := make([]byte, n+1)
	got, err := f.ReadAt(b, 0)
	if got != n || err == nil {
		t.Fatalf("file holds %d bytes (%v), want %d", got, err, n)
	}
	return b[:got]
}

// fileDir is a directory that can hold page files: the test's own, or
// one in defaultSendfileDir where the test's is on tmpfs.
func fileDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if checkFileDir(dir) == nil {
		return dir
	}
	dir, err := os.MkdirTemp(defaultSendfileDir, "tradergate-test-")
	if err != nil {
		t.Fatalf("no directory for page files: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := checkFileDir(dir); err != nil {
		t.Fatalf("no directory for page files: %v", err)
	}
	return dir
}

// isOpen tells whether the file can still be sent (Control holds it).
func isOpen(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	return rc.Control(func(uintptr) {}) == nil
}

// TestFileHoldsThePage: a form at least sendfile_min_bytes long gets one
// unnamed file per form holding exactly its bytes, made on the first call
// and charged to the store once. The default sets no upper bound, so a
// 400 KiB page gets its file; TestFileMaxBytes checks a bound.
func TestFileHoldsThePage(t *testing.T) {
	c := newTestCache(t, Config{SendfileDir: fileDir(t)}, newClock(), Options{})
	body := page(400<<10, 1)
	e := mustGet(t, c, "big", func(context.Context, func() bool) ([]byte, Facts, error) { return body, liveFacts, nil }, Miss)
	before := ledger(c)
	f := e.File(false)
	if f == nil {
		t.Fatal("no file for a 400 KiB page")
	}
	if !bytes.Equal(fileBytes(t, f, len(body)), body) {
		t.Fatal("the file differs from the page")
	}
	if got, want := ledger(c)-before, pageRound(int64(len(body))); got != want {
		t.Errorf("the ledger grew by %d, want the file's %d", got, want)
	}
	if e.File(false) != f || ledger(c)-before != pageRound(int64(len(body))) {
		t.Error("a second call made or charged another file")
	}
	if fi, err := f.Stat(); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v (%v), want 0600", fi.Mode(), err)
	}

	gz := e.GzipBody()
	if len(gz) < DefaultSendfileMinBytes {
		t.Fatalf("gzip form of %d bytes: too short for this test", len(gz))
	}
	zf := e.File(true)
	if zf == nil || zf == f || !bytes.Equal(fileBytes(t, zf, len(gz)), gz) {
		t.Fatal("the gzip file does not hold the gzip form")
	}
	st := c.Stats()
	if want := uint64(pageRound(int64(len(body))) + pageRound(int64(len(gz)))); st.Files != 2 || st.FileBytes != want {
		t.Errorf("Stats: %d files, %d bytes; want 2, %d", st.Files, st.FileBytes, want)
	}
}

// TestFileNone: short forms, files turned off, and pages the store did not
// take get no file, and nothing is charged for asking.
func TestFileNone(t *testing.T) {
	c := newTestCache(t, Config{SendfileDir: fileDir(t)}, newClock(), Options{})
	short := bytes.Clone(page(DefaultSendfileMinBytes, 2)[:DefaultSendfileMinBytes-1])
	e := mustGet(t, c, "short", func(context.Context, func() bool) ([]byte, Facts, error) { return short, liveFacts, nil }, Miss)
	e.GzipBody() // made and charged here, not by File
	before := ledger(c)
	if e.File(false) != nil || e.File(true) != nil || ledger(c) != before {
		t.Error("a page under sendfile_min_bytes got a file or a charge")
	}

	off := newTestCache(t, Config{SendfileMinBytes: -1, SendfileDir: fileDir(t)}, newClock(), Options{})
	e = mustGet(t, off, "big", func(context.Context, func() bool) ([]byte, Facts, error) { return page(400<<10, 3), liveFacts, nil }, Miss)
	if e.File(false) != nil {
		t.Error("sendfile_min_bytes -1 made a file")
	}

	// A page larger than the whole store is served, never stored.
	small := newTestCache(t, Config{MaxBytes: 1 << 20, SendfileDir: fileDir(t)}, newClock(), Options{})
	e = mustGet(t, small, "huge", func(context.Context, func() bool) ([]byte, Facts, error) { return page(2<<20, 4), liveFacts, nil }, Miss)
	if e.File(false) != nil || small.Stats().Files != 0 {
		t.Error("a page the store refused got a file")
	}
}

// TestFileMaxBytes: a form longer than sendfile_max_bytes is sent from
// memory (no file, no charge) while a shorter form of the same page gets
// its file; a reload that lifts the bound gives the long form its file;
// and a bound under sendfile_min_bytes is refused.
func TestFileMaxBytes(t *testing.T) {
	const bound = 256 << 10
	c := newTestCache(t, Config{SendfileDir: fileDir(t), SendfileMaxBytes: bound}, newClock(), Options{})
	body := page(600<<10, 7)
	e := mustGet(t, c, "big", func(context.Context, func() bool) ([]byte, Facts, error) { return body, liveFacts, nil }, Miss)
	gz := e.GzipBody()
	if len(body) <= bound || len(gz) > bound || len(gz) < DefaultSendfileMinBytes {
		t.Fatalf("forms of %d and %d bytes: not astride the bounds", len(body), len(gz))
	}
	before := ledger(c)
	if e.File(false) != nil || ledger(c) != before {
		t.Error("a form longer than sendfile_max_bytes got a file or a charge")
	}
	if e.File(true) == nil {
		t.Error("the gzip form, within both bounds, got no file")
	}
	// The default (zero) sets no bound, as -1 does.
	if err := c.SetConfig(Config{SendfileDir: fileDir(t)}); err != nil {
		t.Fatal(err)
	}
	if f := e.File(false); f == nil || !bytes.Equal(fileBytes(t, f, len(body)), body) {
		t.Error("sendfile_max_bytes by default: the long form has no file holding it")
	}
	if err := c.SetConfig(Config{SendfileDir: fileDir(t), SendfileMaxBytes: len(gz) - 1}); err != nil {
		t.Fatal(err)
	}
	if e.File(true) != nil {
		t.Error("a bound lowered under the gzip form still sends its file")
	}

	for _, cfg := range []Config{
		{SendfileMaxBytes: DefaultSendfileMinBytes - 1},
		{SendfileMinBytes: 1 << 20, SendfileMaxBytes: 1<<20 - 1},
		{SendfileMinBytes: 4096, SendfileMaxBytes: 4095},
	} {
		err := cfg.Validate(nil)
		if err == nil || !strings.Contains(err.Error(), "cache.sendfile_max_bytes: must be at least cache.sendfile_min_bytes") {
			t.Errorf("%+v: %v, want sendfile_max_bytes refused", cfg, err)
		}
	}
	for _, cfg := range []Config{
		{SendfileMinBytes: 1 << 20, SendfileMaxBytes: -1},
		{SendfileMinBytes: 1 << 20},
		{SendfileMinBytes: -1, SendfileMaxBytes: 1},
		{SendfileMinBytes: 4096, SendfileMaxBytes: 4096},
	} {
		if err := cfg.Validate(nil); err != nil {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

// TestFileDir: a directory that cannot hold page files (missing, or on
// tmpfs, where sending measured dearer than writing from memory) turns
// them off with a log line saying why, at start and on SetConfig.
func TestFileDir(t *testing.T) {
	var logs testkit.LogBuffer
	missing := t.TempDir() + "/none"
	c := newTestCache(t, Config{SendfileDir: missing}, newClock(), Options{Logger: logs.Logger()})
	e := mustGet(t, c, "big", func(context.Context, func() bool) ([]byte, Facts, error) { return page(200<<10, 5), liveFacts, nil }, Miss)
	if e.File(false) != nil {
		t.Error("a file made in a missing directory")
	}
	if !strings.Contains(logs.String(), "page files off") || !strings.Contains(logs.String(), missing) {
		t.Errorf("log %q: want the reason, naming the directory", logs.String())
	}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		before := logs.Count("tmpfs")
		if err := c.SetConfig(Config{SendfileDir: "/dev/shm"}); err != nil {
			t.Fatal(err)
		}
		if logs.Count("tmpfs") == before {
			t.Errorf("log %q: want tmpfs named", logs.String())
		}
	}
	if err := c.SetConfig(Config{SendfileDir: fileDir(t)}); err != nil {
		t.Fatal(err)
	}
	e = mustGet(t, c, "big2", func(context.Context, func() bool) ([]byte, Facts, error) { return page(200<<10, 6), liveFacts, nil }, Miss)
	if e.File(false) == nil {
		t.Error("no file once a usable directory is configured")
	}
}

// TestFileClosedWhenPageLeaves: replaced, dropped, evicted or closed with
// the cache, a page's file is closed (an answer holding it then falls back
// to the heap) and no new one is made for it.
func TestFileClosedWhenPageLeaves(t *testing.T) {
	clk := newClock()
	c := newTestCache(t, Config{MaxBytes: 4 << 20, SendfileDir: fileDir(t)}, clk, Options{})
	fetch := func(seed uint64) Fetch {
		return func(context.Context, func() bool) ([]byte, Facts, error) { return page(200<<10, seed), liveFacts, nil }
	}
	old := mustGet(t, c, "k", fetch(1), Miss)
	f := old.File(false)
	if f == nil || !isOpen(f) {
		t.Fatal("no open file")
	}
	clk.Advance(time.Hour) // past every window: the next Get replaces it
	cur := mustGet(t, c, "k", fetch(2), Miss)
	c.store.rc.Wait()
	if isOpen(f) {
		t.Error("the replaced page's file is open")
	}
	if old.File(false) != nil || old.File(true) != nil {
		t.Error("a page out of the store made a file")
	}
	if cur.File(false) == nil {
		t.Fatal("the new page has no file")
	}
	if st := c.Stats(); st.Files != 1 {
		t.Errorf("%d files open, want 1", st.Files)
	}
	// A form made on a hit sets the held entry again (grow): ristretto
	// gives the entry back to OnExit as it replaces it with itself, and
	// the entry stays held, its file open.
	if cur.GzipBody() == nil {
		t.Fatal("no gzip form")
	}
	c.store.rc.Wait()
	if old.holds.Load() != 0 || cur.holds.Load() != 1 || !isOpen(cur.File(false)) || c.store.get("k") != cur {
		t.Errorf("holds: replaced %d, current %d (want 0 and 1); the current page's file open %v",
			old.holds.Load(), cur.holds.Load(), isOpen(cur.File(false)))
	}

	// Dropped, as a shared-tier page whose identity would not inflate is
	// (forms.go). Before the evictions below: in a full store ristretto's
	// admission may refuse the page, which then never gets a file.
	e := mustGet(t, c, "d", fetch(3), Miss)
	df := e.File(false)
	if df == nil {
		t.Fatal("the page to drop has no file")
	}
	c.store.drop(e)
	c.store.rc.Wait()
	if isOpen(df) {
		t.Error("a dropped page's file is open")
	}

	// Evictions: ten times the store in pages, each with its file.
	for i := range 200 {
		e := mustGet(t, c, fmt.Sprint("e", i), fetch(uint64(10+i)), Miss)
		e.File(false)
	}
	c.store.rc.Wait()
	var held uint64
	c.store.rc.IterValues(func(e *Entry) bool {
		if e.idFile.h != nil && !e.idFile.h.closed.Load() {
			held++
		}
		return false
	})
	if st := c.Stats(); st.Files != held || st.Evictions == 0 {
		t.Errorf("%d files open, %d held by stored pages (evictions %d)", st.Files, held, st.Evictions)
	}
	c.store.rc.IterValues(func(e *Entry) bool {
		if n := e.holds.Load(); n != 1 {
			t.Errorf("a stored page with %d holds", n)
		}
		return false
	})

	c.Close()
	if st := c.Stats(); st.Files != 0 || st.FileBytes != 0 {
		t.Errorf("after Close: %d files, %d bytes", st.Files, st.FileBytes)
	}
}

// TestFileRace runs answers that take and read a page's file while the
// page is replaced, under -race: every read sees the whole page or finds
// the file closed, never a short or foreign one.
func TestFileRace(t *testing.T) {
	clk := newClock()
	c := newTestCache(t, Config{SendfileDir: fileDir(t)}, clk, Options{})
	bodies := [][]byte{page(100<<10, 5), page(100<<10, 6)}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			buf := make([]byte, 200<<10)
			for {
				select {
				case <-stop:
					return
				default:
				}
				e, _, err := c.get(context.Background(), "k", func(context.Context, func() bool) ([]byte, Facts, error) { return bodies[0], liveFacts, nil })
				if err != nil {
					t.Error(err)
					return
				}
				f := e.File(false)
				if f == nil {
					continue // asked after the page left: none
				}
				rc, _ := f.SyscallConn()
				var n int
				var rerr error
				err = rc.Control(func(fd uintptr) {
					// Raw, as sendfile reads it: the File's own methods
					// refuse once Close has begun, even under Control.
					n, rerr = syscall.Pread(int(fd), buf[:len(e.Body())], 0)
				})
				if err != nil {
					continue // closed under us: an answer sends the heap
				}
				if rerr != nil || n != len(e.Body()) || !bytes.Equal(buf[:n], e.Body()) {
					t.Errorf("read %d bytes (%v) that are not the page", n, rerr)
					return
				}
			}
		})
	}
	for i := range 50 {
		clk.Advance(time.Hour)
		body := bodies[i%2]
		// A reader may fetch first: whichever does, the page is replaced.
		if _, _, err := c.get(context.Background(), "k", func(context.Context, func() bool) ([]byte, Facts, error) { return body, liveFacts, nil }); err != nil {
			t.Error(err)
		}
	}
	close(stop)
	wg.Wait()
	c.Close()
	if st := c.Stats(); st.Files != 0 {
		t.Errorf("%d files open after Close", st.Files)
	}
}

// TestFileLimit: page files keep to their share of the descriptor limit;
// a page refused a file gets one once others have closed.
func TestFileLimit(t *testing.T) {
	if max := maxPageFiles(); max < 16 {
		t.Errorf("maxPageFiles %d: the descriptor limit was not read", max)
	}
	clk := newClock()
	c := newTestCache(t, Config{SendfileDir: fileDir(t)}, clk, Options{})
	c.maxFiles = 1
	fetch := func(seed uint64) Fetch {
		return func(context.Context, func() bool) ([]byte, Facts, error) { return page(100<<10, seed), liveFacts, nil }
	}
	a := mustGet(t, c, "a", fetch(1), Miss)
	b := mustGet(t, c, "b", fetch(2), Miss)
	if a.File(false) == nil {
		t.Fatal("no file under the limit")
	}
	if b.File(false) != nil {
		t.Fatal("a file past the limit")
	}
	c.store.drop(a)
	c.store.rc.Wait()
	if b.File(false) == nil {
		t.Error("no file once the other closed")
	}
}
