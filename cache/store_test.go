package cache

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"tradergate/internal/testkit"
)

// page returns a JSON-like body of about n bytes: compressible, like the
// real pages, but different for every seed.
func page(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	var b bytes.Buffer
	b.WriteString(`{"message":"OK","status_code":"1","data":{"items":[`)
	for b.Len() < n-40 {
		fmt.Fprintf(&b, `{"price":"0.%02d","size":"%d.%d","timestamp":%d},`,
			r.IntN(100), r.IntN(100000), r.IntN(100), 1772366400000+r.Int64N(1e9))
	}
	b.WriteString(`{}],"nextCursor":null}}`)
	return bytes.Clone(b.Bytes()) // exact capacity, as a fetch would hand over
}

// heldCost sums the costs of the entries the store holds, independently of
// ristretto's ledger.
func heldCost(c *Cache) int64 {
	var sum int64
	c.store.rc.IterValues(func(e *Entry) bool { sum += e.cost.Load(); return false })
	return sum
}

// TestByteBound inserts 50 times max_bytes in pages of varied sizes, new
// keys and replacements that grow, from several goroutines at once. The
// store's ledger never exceeds max_bytes; between rounds, once ristretto has
// applied every buffered set (Wait), neither does the sum of the costs of the
// entries it holds. (While sets are applied, ristretto stores a new entry
// just before it drops the victims that make room for it.)
func TestByteBound(t *testing.T) {
	const maxBytes = 1 << 20
	clk := newClock()
	c := newTestCache(t, Config{MaxBytes: maxBytes}, clk, Options{})
	var bases [][]byte // built once: page() is slow under -race
	for _, n := range []int{300, 2 << 10, 8 << 10, 40 << 10, 120 << 10, 240 << 10} {
		bases = append(bases, page(n, uint64(n)))
	}
	ledger := func() {
		t.Helper()
		if s := c.Stats(); s.Bytes > maxBytes {
			t.Errorf("Stats().Bytes = %d > max_bytes %d", s.Bytes, maxBytes)
		}
		if used := c.store.rc.MaxCost() - c.store.rc.RemainingCost(); used > maxBytes {
			t.Errorf("ristretto's ledger holds %d > %d", used, maxBytes)
		}
	}
	var inserted atomic.Int64
	for round := 0; inserted.Load() < 50*maxBytes; round++ {
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := range 32 {
					key := fmt.Sprintf("r%d-w%d-k%d", round, w, i)
					base := bases[(i+w)%(len(bases)-1)]
					if i%4 == 0 {
						// A quarter are replacements of a few keys, growing.
						key = fmt.Sprintf("w%d-hot%d", w, i%8)
						base = bases[len(bases)-3+(round+i)%3]
					}
					body := bytes.Clone(base)
					copy(body[1:], key) // distinct content per key
					inserted.Add(int64(len(body)))
					_, _, err := c.get(context.Background(), key, func(context.Context, func() bool) ([]byte, Facts, error) {
						return body, liveFacts, nil
					})
					if err != nil {
						t.Error(err)
						return
					}
					ledger()
				}
			})
		}
		wg.Wait()
		c.store.rc.Wait()
		ledger()
		if sum := heldCost(c); sum > maxBytes {
			t.Fatalf("round %d: entries held cost %d > %d", round, sum, maxBytes)
		}
		clk.Advance(3 * time.Second) // held pages expire: the next round replaces them
	}
	s := c.Stats()
	if s.Evictions == 0 || s.Entries == 0 {
		t.Errorf("stats %+v: want evictions and entries", s)
	}
	t.Logf("inserted %d MiB into 1 MiB: %+v", inserted.Load()>>20, s)
}

// TestTooLarge: a page larger than the whole store is served (the flight
// hands it over) but never stored; correctness does not depend on a Set.
func TestTooLarge(t *testing.T) {
	c := newTestCache(t, Config{MaxBytes: 1 << 20}, newClock(), Options{})
	var n atomic.Int64
	big := string(page(2<<20, 1))
	if e := mustGet(t, c, "big", counting(&n, big, liveFacts), Miss); len(e.Body()) != len(big) {
		t.Fatal("wrong body")
	}
	mustGet(t, c, "big", counting(&n, big, liveFacts), Miss)
	if n.Load() != 2 || c.Stats().Rejected != 2 {
		t.Errorf("fetches %d, rejected %d", n.Load(), c.Stats().Rejected)
	}
}

// TestETag: strong, quoted, equal for equal bodies only.
func TestETag(t *testing.T) {
	a, ag := etags([]byte("abc"))
	b, _ := etags([]byte("abc"))
	d, _ := etags([]byte("abd"))
	if a != b || a == d || len(a) != 18 || a[0] != '"' || a[17] != '"' || ag != a[:17]+`-gzip"` {
		t.Errorf("etags %s %s %s %s", a, b, d, ag)
	}
}

// TestBodyTrimmed: a body in a larger buffer is copied, so the store does
// not hold (or charge) the spare capacity.
func TestBodyTrimmed(t *testing.T) {
	c := newTestCache(t, Config{}, newClock(), Options{})
	buf := make([]byte, 100, 1<<20)
	e := mustGet(t, c, "k", func(context.Context, func() bool) ([]byte, Facts, error) { return buf, liveFacts, nil }, Miss)
	if cap(e.Body()) > 128 {
		t.Errorf("cap(Body()) = %d, want a copy of about 100", cap(e.Body()))
	}
}

// TestEntryOverhead keeps the fixed per-entry charge honest if Entry grows:
// the struct and its two ETag strings, plus ~300 B for ristretto's
// records.
func TestEntryOverhead(t *testing.T) {
	e, eg := etags([]byte("x"))
	if got := int(unsafe.Sizeof(Entry{})) + len(e) + len(eg) + 300; got > entryOverhead {
		t.Errorf("an entry takes about %d B beyond its bodies, entryOverhead is %d", got, entryOverhead)
	}
}

// settled reports whether nothing is left settling and the settler waits
// for its next wake (store.go, "Settling").
func settled(c *Cache) bool {
	left := 0
	for i := range c.store.settling {
		sh := &c.store.settling[i]
		sh.mu.Lock()
		left += len(sh.m)
		sh.mu.Unlock()
	}
	st := &c.store.settler
	st.mu.Lock()
	defer st.mu.Unlock()
	return left == 0 && !st.woken && len(st.queued) == 0
}

// TestSettledPageFound: the page a miss stored is found by the next call
// of its key at once, though ristretto applies its set later on its own
// goroutine: one fetch per key, however soon the second call comes. Once
// the settler has run, nothing is left settling.
func TestSettledPageFound(t *testing.T) {
	c := newTestCache(t, Config{}, newClock(), Options{})
	var n atomic.Int64
	const keys = 500
	for i := range keys {
		key := "k" + strconv.Itoa(i)
		mustGet(t, c, key, counting(&n, "{}", liveFacts), Miss)
		mustGet(t, c, key, counting(&n, "{}", liveFacts), Hit)
	}
	if n.Load() != keys {
		t.Fatalf("%d fetches for %d keys", n.Load(), keys)
	}
	testkit.Eventually(t, "nothing left settling", func() bool { return settled(c) })
	if s := c.Stats(); s.Entries != keys {
		t.Fatalf("%d entries, want %d", s.Entries, keys)
	}
}

// TestGrowWhileSettling: a form made on a hit before ristretto has applied
// the set of its miss is charged all the same (grow waits for the set).
func TestGrowWhileSettling(t *testing.T) {
	c := newTestCache(t, Config{}, newClock(), Options{})
	var n atomic.Int64
	const grown = 1000
	var es []*Entry
	for i := range 200 {
		e := mustGet(t, c, "k"+strconv.Itoa(i), counting(&n, "{}", liveFacts), Miss)
		before := e.cost.Load()
		c.store.grow(e, grown)
		if got := e.cost.Load(); got != before+grown {
			t.Fatalf("entry %d: cost %d after growing by %d from %d", i, got, grown, before)
		}
		es = append(es, e)
	}
	c.store.applied()
	if held, ledger := heldCost(c), c.store.bytes(); held != ledger {
		t.Fatalf("entries held cost %d, ristretto's ledger %d", held, ledger)
	}
	for i, e := range es {
		if c.store.get(e.key) != e || e.holds.Load() != 1 {
			t.Fatalf("entry %d: held %v, %d holds", i, c.store.get(e.key) == e, e.holds.Load())
		}
	}
}

// TestDropWhileSettling: an entry dropped just after its miss, before or
// while ristretto applies its set, leaves the store all the same.
func TestDropWhileSettling(t *testing.T) {
	c := newTestCache(t, Config{}, newClock(), Options{})
	var n atomic.Int64
	var es []*Entry
	for i := range 200 {
		e := mustGet(t, c, "k"+strconv.Itoa(i), counting(&n, "{}", liveFacts), Miss)
		c.store.drop(e)
		es = append(es, e)
	}
	c.store.applied()
	for i, e := range es {
		if c.store.get(e.key) != nil || e.holds.Load() != 0 {
			t.Fatalf("entry %d: still held (%v, %d holds) after its drop", i, c.store.get(e.key) == e, e.holds.Load())
		}
	}
}
