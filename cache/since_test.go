package cache

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// getSince is GetSince with the status wanted.
func getSince(t *testing.T, c *Cache, key string, since time.Time, fetch Fetch, want Status) *Entry {
	t.Helper()
	r, err := c.GetSince(context.Background(), key, since, fetch)
	if err != nil {
		t.Fatalf("GetSince(%q): %v", key, err)
	}
	if r.Status != want {
		t.Fatalf("GetSince(%q): status %v, want %v", key, r.Status, want)
	}
	return r.Entry
}

// GetSince does not answer with a page stored before its moment, fresh or
// inside stale_while_revalidate: it fetches anew. A page stored at or after
// it answers as Get would. When the fetch fails, stale_if_error still
// serves the older page.
func TestGetSince(t *testing.T) {
	clk := newClock()
	cfg := Config{Policy: Policy{FreshTTL: time.Second, StaleWhileRevalidate: time.Second, StaleIfError: time.Minute}}
	c := newTestCache(t, cfg, clk, Options{})
	var n atomic.Int64
	fetch := versions(&n, liveFacts)

	t0 := clk.Now()
	mustGet(t, c, "k", fetch, Miss) // v1, stored at t0
	clk.Advance(900 * time.Millisecond)
	if e := getSince(t, c, "k", t0, fetch, Hit); body(e) != "v1" {
		t.Fatalf("stored at since: %q, want the cached v1", body(e))
	}
	if e := getSince(t, c, "k", t0.Add(time.Millisecond), fetch, Miss); body(e) != "v2" {
		t.Fatalf("fresh but older than since: %q, want v2 fetched", body(e))
	}
	if e := mustGet(t, c, "k", fetch, Hit); body(e) != "v2" {
		t.Fatalf("then Get: %q", body(e))
	}

	// Inside stale_while_revalidate, Get serves the page stale, GetSince
	// fetches.
	t1 := clk.Now()
	clk.Advance(1500 * time.Millisecond)
	if e := getSince(t, c, "k", t1.Add(time.Millisecond), fetch, Miss); body(e) != "v3" {
		t.Fatalf("stale and older than since: %q, want v3", body(e))
	}

	// A failing fetch: the older page, as stale_if_error allows.
	t2 := clk.Now()
	clk.Advance(500 * time.Millisecond)
	failing := func(context.Context, func() bool) ([]byte, Facts, error) { return nil, liveFacts, errUpstream }
	if e := getSince(t, c, "k", t2.Add(time.Millisecond), failing, Stale); body(e) != "v3" {
		t.Fatalf("failed fetch: %q, want the held v3", body(e))
	}
	if got := n.Load(); got != 3 {
		t.Errorf("%d fetches, want 3", got)
	}
}

// Across the shared tier: a page another replica stored in L2 before the
// moment does not answer either.
func TestGetSinceL2(t *testing.T) {
	f := newFleet(t, 2, Config{Policy: Policy{FreshTTL: time.Second}}, Options{})
	var n atomic.Int64
	fetch := versions(&n, liveFacts)
	t0 := f.clk.Now()
	mustGet(t, f.cs[0], "k", fetch, Miss) // v1 in L2, stored at t0
	f.clk.Advance(200 * time.Millisecond)
	if e := getSince(t, f.cs[1], "k", t0, fetch, HitL2); body(e) != "v1" {
		t.Fatalf("L2 page stored at since: %q", body(e))
	}
	if e := getSince(t, f.cs[1], "k", t0.Add(time.Millisecond), fetch, Miss); body(e) != "v2" {
		t.Fatalf("L2 page older than since: %q, want v2 fetched", body(e))
	}
}
