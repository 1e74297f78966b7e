package orderbook

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"tradergate/legacysim"
)

func TestPageBound(t *testing.T) {
	const settled = 1_700_000_600_000
	for _, tc := range []struct {
		name    string
		at      int64
		align   time.Duration
		settled int64
		want    int64
		aligned bool
	}{
		{"rounded up", 1_700_000_000_001, time.Minute, settled, 1_700_000_040_000, true},
		{"on a boundary", 1_700_000_040_000, time.Minute, settled, 1_700_000_040_000, true},
		{"just past a boundary", 1_700_000_040_001, time.Minute, settled, 1_700_000_100_000, true},
		{"bound not settled", 1_700_000_590_001, time.Minute, settled, 1_700_000_590_001, false},
		{"bound the first unsettled ms", 1_700_000_540_001, time.Minute, 1_700_000_580_000, 1_700_000_540_001, false},
		{"bound the last settled ms", 1_700_000_540_001, time.Minute, 1_700_000_580_001, 1_700_000_580_000, true},
		{"off", 1_700_000_000_001, 0, settled, 1_700_000_000_001, false},
		{"negative: off", 1_700_000_000_001, -time.Minute, settled, 1_700_000_000_001, false},
		{"below a millisecond: off", 1_700_000_000_001, time.Microsecond, settled, 1_700_000_000_001, false},
		{"zero", 0, time.Minute, settled, 0, true},
		{"would overflow", math.MaxInt64 - 5, time.Minute, math.MaxInt64, math.MaxInt64 - 5, false},
	} {
		if got, aligned := pageBound(tc.at, tc.align, tc.settled); got != tc.want || aligned != tc.aligned {
			t.Errorf("%s: pageBound(%d, %v, %d) = %d, %v; want %d, %v", tc.name, tc.at, tc.align, tc.settled, got, aligned, tc.want, tc.aligned)
		}
	}
}

func boundOf(at int64, align time.Duration, settled int64) int64 {
	to, _ := pageBound(at, align, settled)
	return to
}

func TestConfigAlign(t *testing.T) {
	var c Config
	c.ApplyDefaults()
	if c.Align != defaultAlign || c.Validate() != nil {
		t.Fatalf("defaults: %+v, %v", c, c.Validate())
	}
	for _, bad := range []time.Duration{time.Millisecond + time.Microsecond, 2 * time.Hour} {
		c.Align = bad
		if err := c.Validate(); err == nil {
			t.Errorf("align %v accepted", bad)
		}
	}
	c.Align = -1
	if err := c.Validate(); err != nil {
		t.Errorf("align off refused: %v", err)
	}
}

// On aligned bounds a rebuild answers what it answers on the exact bound
// (and what the reference does), at random times over two legacysim streams (the variety one has runs of
// more than a page of changes), with aligns from 3 ms to an hour.
func TestRebuildAlignedMatchesExact(t *testing.T) {
	for _, tc := range []struct {
		cfg   legacysim.Config
		times int // the variety stream is long: its rebuilds are slow under -race
	}{
		{legacysim.Config{Markets: 1, History: 6 * time.Hour}, 24},
		{legacysim.Config{Markets: 1, History: 2 * time.Hour, OrderBookVariety: true}, 8},
	} {
		cfg := tc.cfg
		sim, get := simPages(t, cfg)
		m := &memo{next: func(ctx context.Context, q Query) ([]byte, error) { return get(ctx, queryValues(q)) }}
		token := sim.Markets()[0].Tokens[0]
		evs := allEvents(t, get, token)
		first, last := evs[0].Timestamp, evs[len(evs)-1].Timestamp
		rng := rand.New(rand.NewPCG(1, uint64(len(evs))))
		moved := 0
		for i := range tc.times {
			T := first - 60_000 + rng.Int64N(last-first+120_000)
			align := []time.Duration{3 * time.Millisecond, 7 * time.Millisecond, time.Second, time.Minute, 10 * time.Minute, time.Hour}[rng.IntN(6)]
			if checkAligned(t, m.page, token, T, Options{}, align) {
				moved++
			}
			if i%4 == 0 { // the reference is slow: the exact bound is checked against it elsewhere
				checkRebuild(t, m.page, evs, token, T, Options{Align: align, Settled: math.MaxInt64})
			}
		}
		if moved < tc.times/2 {
			t.Fatalf("only %d of %d times had a bound other than themselves", moved, tc.times)
		}
	}
}

// Rebuilds at T and T+1 ms within one settled span read the same pages:
// the second reads none its cache lacks. On the exact bound they share
// none. (The sim's snapshots are in the first second of every tenth
// minute: no time below has one between it and its bound.)
func TestRebuildAlignedSharesPages(t *testing.T) {
	sim, get := simPages(t, legacysim.Config{Markets: 1, History: 6 * time.Hour})
	next := func(ctx context.Context, q Query) ([]byte, error) { return get(ctx, queryValues(q)) }
	token := sim.Markets()[0].Tokens[0]
	settled := simEnd.Add(-5 * time.Minute).UnixMilli()
	aligned := Options{Align: time.Minute, Settled: settled}
	for _, T := range []int64{
		simEnd.Add(-3*time.Hour+5*time.Minute).UnixMilli() + 1,
		simEnd.Add(-2*time.Hour).UnixMilli() + 12_345,
		simEnd.Add(-7*time.Minute).UnixMilli() + 1,
	} {
		m := &memo{next: next}
		if _, err := Rebuild(context.Background(), m.page, token, T, aligned); err != nil {
			t.Fatal(err)
		}
		first := m.misses
		for _, at := range []int64{T + 1, T + 30_000, boundOf(T, time.Minute, settled)} {
			if _, err := Rebuild(context.Background(), m.page, token, at, aligned); err != nil || m.misses != first {
				t.Fatalf("T=%d, then %d: %d pages read, then %d (%v)", T, at, first, m.misses, err)
			}
		}

		exact := &memo{next: next}
		for _, at := range []int64{T, T + 1} {
			if _, err := Rebuild(context.Background(), exact.page, token, at, Options{}); err != nil {
				t.Fatal(err)
			}
		}
		if exact.misses != 2*first {
			t.Fatalf("T=%d on the exact bound: %d pages for two rebuilds, want %d", T, exact.misses, 2*first)
		}
	}
	// A time whose rounded bound is not settled reads its exact bound.
	T := simEnd.Add(-5*time.Minute).UnixMilli() - 10_000
	m := &memo{next: next}
	if _, err := Rebuild(context.Background(), m.page, token, T, aligned); err != nil {
		t.Fatal(err)
	}
	for q := range m.pages {
		if q.To != T {
			t.Fatalf("recent T=%d read a page bounded at %d", T, q.To)
		}
	}
}

// Snapshots closer together than the aligned span: the lookup pages past
// the ones after T until the first at or before it.
func TestRebuildAlignedPastManySnapshots(t *testing.T) {
	var evs []event
	prices := []string{"0.4", "0.41", "0.42", "0.43", "0.44"}
	for i := range 40 {
		ts := 1000 + 2*int64(i)
		evs = append(evs, snapshot(ts, [][2]string{{prices[i%5], strconv.Itoa(i + 1)}}, [][2]string{{"0.6", "1"}}),
			change(ts+1, "BUY", prices[(i+1)%5], "7"))
	}
	mem := newMem("7", evs)
	aligned := Options{Align: 100 * time.Millisecond, Settled: math.MaxInt64}
	for T := int64(990); T <= 1090; T++ {
		before := mem.pages.Load()
		checkRebuild(t, mem.page, mem.events, "7", T, aligned)
		// Pages of snapshots up to the first one at or before T, and one
		// of changes.
		bound, _ := pageBound(T, aligned.Align, aligned.Settled)
		after := 0
		for _, e := range evs {
			if e.EventType == "book" && e.Timestamp > T && e.Timestamp <= bound {
				after++
			}
		}
		if pages := mem.pages.Load() - before; T >= 1000 && pages != int64(after/snapshotPageSize+2) {
			t.Fatalf("T=%d: %d pages, %d snapshots after it", T, pages, after)
		}
		checkAligned(t, mem.page, "7", T, Options{}, 100*time.Millisecond)
	}
}

func TestRebuildAlignedBadPages(t *testing.T) {
	book := func(ts int) string {
		return `{"cursor":"c` + strconv.Itoa(ts) + `","tokenId":"7","eventType":"book","timestamp":` + strconv.Itoa(ts) + `,"bids":[],"asks":[]}`
	}
	page := func(items ...string) []byte {
		return []byte(`{"message":"OK","status_code":"1","data":{"items":[` + strings.Join(items, ",") + `],"nextCursor":null}}`)
	}
	for _, tc := range []struct {
		name     string
		snapshot []byte
	}{
		{"ascending snapshot page", page(book(1500), book(1990), book(1995))},
		{"snapshot after the bound", page(book(2001), book(1500))},
		{"candidate without a cursor", page(strings.Replace(book(1995), `"cursor":"c1995",`, ``, 1), book(1500))},
	} {
		fetch := func(_ context.Context, q Query) ([]byte, error) {
			if q.EventType == evBook {
				return tc.snapshot, nil
			}
			return page(), nil
		}
		b, err := Rebuild(context.Background(), fetch, "7", 1990, Options{Align: time.Second, Settled: math.MaxInt64})
		if !errors.Is(err, ErrBadPage) || b != nil {
			t.Errorf("%s: got %+v, %v; want ErrBadPage", tc.name, b, err)
		}
	}
}
