package cache

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/gzip"
)

func gunzipAll(t *testing.T, gz []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return plain
}

// ledger is ristretto's ledger once every buffered update is applied.
func ledger(c *Cache) int64 {
	c.store.rc.Wait()
	return c.store.bytes()
}

// TestGzipLazy: a miss stores the identity body only; the first gzip hit
// makes the copy, whose decompression is the body, and the store charges it
// from then on; later hits get the same copy at no further charge.
func TestGzipLazy(t *testing.T) {
	c := newTestCache(t, Config{}, newClock(), Options{})
	for _, n := range []int{1025, 8 << 10, 400 << 10} {
		key := fmt.Sprint("big", n)
		body := page(n, uint64(n))
		e := mustGet(t, c, key, func(context.Context, func() bool) ([]byte, Facts, error) { return body, liveFacts, nil }, Miss)
		before := ledger(c)
		if want := int64(cap(body)+len(key)) + entryOverhead; e.cost.Load() != want {
			t.Fatalf("%d B: cost at insert %d, want %d (identity only)", n, e.cost.Load(), want)
		}
		e = mustGet(t, c, key, nil, Hit)
		gz := e.GzipBody()
		if gz == nil || len(gz) >= len(body) {
			t.Fatalf("%d B: gzip %d B", n, len(gz))
		}
		if !bytes.Equal(gunzipAll(t, gz), e.Body()) {
			t.Fatalf("%d B: gunzip differs from body", n)
		}
		if got := ledger(c) - before; got != int64(cap(gz)) {
			t.Errorf("%d B: the ledger grew by %d, want the copy's %d", n, got, cap(gz))
		}
		after := ledger(c)
		if again := e.GzipBody(); &again[0] != &gz[0] || ledger(c) != after {
			t.Errorf("%d B: a second gzip hit made or charged another copy", n)
		}
		if e.ETag == "" || e.GzipETag() != strings.TrimSuffix(e.ETag, `"`)+`-gzip"` {
			t.Errorf("etags %s %s", e.ETag, e.GzipETag())
		}
	}
}

// TestGzipNever: small and incompressible pages, and compression turned
// off, never get a copy, and nothing is charged for asking.
func TestGzipNever(t *testing.T) {
	c := newTestCache(t, Config{}, newClock(), Options{})
	noise := make([]byte, 4096)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(noise)
	for name, body := range map[string][]byte{"small": page(1024, 1)[:1024], "noise": noise} {
		e := mustGet(t, c, name, func(context.Context, func() bool) ([]byte, Facts, error) { return body, liveFacts, nil }, Miss)
		before := ledger(c)
		// Asked twice: a page found not worth compressing stays so, and
		// the second ask must not try again and charge for a copy.
		first, second := e.GzipBody(), e.GzipBody()
		if first != nil || second != nil || ledger(c) != before {
			t.Errorf("%s: got a gzip copy or a charge", name)
		}
	}
	off := newTestCache(t, Config{CompressMinBytes: -1}, newClock(), Options{})
	e := mustGet(t, off, "k", func(context.Context, func() bool) ([]byte, Facts, error) { return page(8<<10, 1), liveFacts, nil }, Miss)
	if e.GzipBody() != nil {
		t.Error("compress_min_bytes -1 still compressed")
	}
}

// TestGzipOnce: concurrent first gzip hits share one copy, charged once.
func TestGzipOnce(t *testing.T) {
	c := newTestCache(t, Config{}, newClock(), Options{})
	body := page(64<<10, 3)
	e := mustGet(t, c, "k", func(context.Context, func() bool) ([]byte, Facts, error) { return body, liveFacts, nil }, Miss)
	base := e.cost.Load()
	const n = 50
	got := make([][]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { got[i] = e.GzipBody() })
	}
	wg.Wait()
	for _, g := range got {
		if &g[0] != &got[0][0] {
			t.Fatal("concurrent first hits got different copies")
		}
	}
	if e.cost.Load() != base+int64(cap(got[0])) || ledger(c) != e.cost.Load() {
		t.Errorf("cost %d, ledger %d, want %d", e.cost.Load(), ledger(c), base+int64(cap(got[0])))
	}
}

// TestGrowReplaced: the copy made for an entry its key's flight has since
// replaced does not put the old entry back, nor charge the store.
func TestGrowReplaced(t *testing.T) {
	clk := newClock()
	c := newTestCache(t, Config{}, clk, Options{})
	old := mustGet(t, c, "k", func(context.Context, func() bool) ([]byte, Facts, error) { return page(8<<10, 1), liveFacts, nil }, Miss)
	clk.Advance(3e9)
	cur := mustGet(t, c, "k", func(context.Context, func() bool) ([]byte, Facts, error) { return page(8<<10, 2), liveFacts, nil }, Miss)
	before := ledger(c)
	if old.GzipBody() == nil {
		t.Fatal("no copy")
	}
	if e := c.store.get("k"); e != cur || ledger(c) != before {
		t.Errorf("the store holds %p (current %p), ledger %d -> %d", e, cur, before, ledger(c))
	}
}

// TestInflate: an entry that arrives gzip only inflates its identity body
// on the first identity hit, charged once; a stream that inflates to other
// bytes than its ETag names is dropped and counted.
func TestInflate(t *testing.T) {
	c := newTestCache(t, Config{}, newClock(), Options{})
	body := page(20<<10, 4)
	gz := c.z.gzip(body)
	build := func(key, etag string) *Entry {
		e := &Entry{Stored: c.now(), TTL: 1e9, ETag: etag}
		c.newForms(e, nil, gz, len(body), true)
		c.store.put(key, e, c.lifetime(e))
		return e
	}
	good, _ := etags(body)
	e := build("good", good)
	base := e.cost.Load()
	if !bytes.Equal(e.Body(), body) || &e.GzipBody()[0] != &gz[0] {
		t.Fatal("inflated body differs, or the gzip form changed")
	}
	if e.cost.Load() != base+int64(len(body)) || ledger(c) != e.cost.Load() {
		t.Errorf("cost %d, ledger %d, want %d", e.cost.Load(), ledger(c), base+int64(len(body)))
	}
	bad := build("bad", `"0000000000000000"`)
	if bad.Body() != nil || c.store.get("bad") != nil || c.Stats().L2Corrupt != 1 {
		t.Errorf("a mismatched stream was served or kept: stats %+v", c.Stats())
	}
}
