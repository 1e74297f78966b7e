package cache

import (
	"testing"
	"time"

	"tradergate/normalize"
)

// TestClassify is the classification table of the policy: every class, and
// requests and pages that are immutable, fresh and null, in milliseconds
// (order book), seconds and block heights.
func TestClassify(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	oldMs := now.Add(-10 * time.Minute).UnixMilli() // settled (window 5m)
	newMs := now.Add(-time.Minute).UnixMilli()      // not yet
	oldS := now.Add(-10 * time.Minute).Unix()
	newS := now.Add(-time.Minute).Unix()
	const (
		fresh  = defaultFreshTTL
		immut  = defaultImmutableTTL
		negat  = defaultNegativeTTL
		ms     = time.Millisecond
		second = time.Second
	)
	items := func(n int, maxTime int64, next bool) normalize.Meta {
		return normalize.Meta{Items: n, MaxTime: maxTime, HasTime: n > 0, NextCursor: next}
	}
	untimed := func(n int, next bool) normalize.Meta {
		return normalize.Meta{Items: n, NextCursor: next}
	}
	book := func(f Facts) Facts {
		f.Route, f.Class, f.TimeUnit = "orderbook_events", normalize.ClassList, ms
		return f
	}
	activity := func(f Facts) Facts { f.Route, f.Class, f.TimeUnit = "activity", normalize.ClassList, second; return f }

	for _, tc := range []struct {
		name      string
		f         Facts
		ttl       time.Duration
		immutable bool
	}{
		// Open positions: always fresh.
		{"live, pinned and old", Facts{Class: normalize.ClassLive, Cursor: true, Meta: items(3, oldS, true), TimeUnit: second}, fresh, false},
		{"live, null", Facts{Class: normalize.ClassLive, Meta: normalize.Meta{DataNull: true}}, fresh, false},
		// Lookups: found immutable, null negative.
		{"tx found", Facts{Class: normalize.ClassLookup}, immut, true},
		{"tx null", Facts{Class: normalize.ClassLookup, Meta: normalize.Meta{DataNull: true}}, negat, false},
		{"wallet mapping null", Facts{Route: "wallet_address", Class: normalize.ClassLookup, Meta: normalize.Meta{DataNull: true}}, negat, false},

		// Order book (ms): upper bound "to".
		{"book head: no cursor, no to", book(Facts{Meta: items(5, oldMs, true)}), fresh, false},
		{"book to settled, items old, last page", book(Facts{HasUpper: true, Upper: oldMs, Meta: items(5, oldMs-1000, false)}), immut, true},
		{"book to settled, items without time", book(Facts{HasUpper: true, Upper: oldMs, Meta: untimed(5, false)}), immut, true},
		{"book to settled, empty", book(Facts{HasUpper: true, Upper: oldMs, Meta: items(0, 0, false)}), immut, true},
		{"book to recent, items old, last page: may grow", book(Facts{HasUpper: true, Upper: newMs, Meta: items(5, oldMs, false)}), fresh, false},
		{"book to recent, items old, nextCursor", book(Facts{HasUpper: true, Upper: newMs, Meta: items(5, oldMs, true)}), immut, true},
		{"book to recent, items recent, nextCursor", book(Facts{HasUpper: true, Upper: newMs, Meta: items(5, newMs, true)}), fresh, false},
		{"book to in the future, empty", book(Facts{HasUpper: true, Upper: now.Add(time.Hour).UnixMilli(), Meta: items(0, 0, false)}), fresh, false},
		{"book to settled in ms, read as seconds", Facts{Class: normalize.ClassList, HasUpper: true, Upper: oldMs, TimeUnit: second, Meta: untimed(5, false)}, fresh, false},
		{"book null", book(Facts{HasUpper: true, Upper: oldMs, Meta: normalize.Meta{DataNull: true}}), negat, false},

		// Cursor pages.
		{"cursor, nextCursor, items old", book(Facts{Cursor: true, Meta: items(5, oldMs, true)}), immut, true},
		{"cursor, last page, items old: may grow", book(Facts{Cursor: true, Meta: items(5, oldMs, false)}), fresh, false},
		{"cursor, nextCursor, items recent", book(Facts{Cursor: true, Meta: items(5, newMs, true)}), fresh, false},
		{"cursor, nextCursor, items without time", book(Facts{Cursor: true, Meta: untimed(5, true)}), fresh, false},
		{"cursor, empty last page", book(Facts{Cursor: true, Meta: items(0, 0, false)}), fresh, false},
		{"cursor, empty, nextCursor", book(Facts{Cursor: true, Meta: items(0, 0, true)}), immut, true},

		// Activity (seconds): toTimestamp and toBlock.
		{"activity head", activity(Facts{Meta: items(20, oldS, true)}), fresh, false},
		{"toTimestamp settled", activity(Facts{HasUpper: true, Upper: oldS, Meta: items(20, oldS, false)}), immut, true},
		{"toTimestamp recent, last page", activity(Facts{HasUpper: true, Upper: newS, Meta: items(2, oldS, false)}), fresh, false},
		{"toBlock, items old, nextCursor", activity(Facts{HasUpper: true, UpperIsBlock: true, Upper: 80_000_000, Meta: items(20, oldS, true)}), immut, true},
		{"toBlock, items old, last page: bound not judgeable", activity(Facts{HasUpper: true, UpperIsBlock: true, Upper: 80_000_000, Meta: items(2, oldS, false)}), fresh, false},
		{"toBlock, empty: bound not judgeable", activity(Facts{HasUpper: true, UpperIsBlock: true, Upper: 1, Meta: items(0, 0, false)}), fresh, false},
		{"toBlock, items without time, nextCursor", activity(Facts{HasUpper: true, UpperIsBlock: true, Upper: 1, Meta: untimed(20, true)}), fresh, false},
		{"unit zero means seconds", Facts{Class: normalize.ClassList, HasUpper: true, Upper: oldS, Meta: items(1, oldS, false)}, immut, true},
		{"unset class is fresh", Facts{HasUpper: true, Upper: oldS, TimeUnit: second, Meta: items(1, oldS, true)}, fresh, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ttl, imm := Policy{}.classify(tc.f, now)
			if ttl != tc.ttl || imm != tc.immutable {
				t.Errorf("classify = (%v, %v), want (%v, %v)", ttl, imm, tc.ttl, tc.immutable)
			}
		})
	}
}

// TestClassifyAcrossSettleWindow moves the clock over the settle window: the
// same page turns from fresh to immutable the moment its newest item (or its
// upper bound) is a full unit older than the window.
func TestClassifyAcrossSettleWindow(t *testing.T) {
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		unit time.Duration
		f    Facts
	}{
		{"ms, newest item", time.Millisecond, Facts{Class: normalize.ClassList, Cursor: true, Meta: normalize.Meta{Items: 3, HasTime: true, MaxTime: base.UnixMilli(), NextCursor: true}}},
		{"s, newest item", time.Second, Facts{Class: normalize.ClassList, HasUpper: true, Upper: base.Unix() + 3600, Meta: normalize.Meta{Items: 3, HasTime: true, MaxTime: base.Unix(), NextCursor: true}}},
		{"s, upper bound", time.Second, Facts{Class: normalize.ClassList, HasUpper: true, Upper: base.Unix(), Meta: normalize.Meta{Items: 3}}},
		{"ms, upper bound", time.Millisecond, Facts{Class: normalize.ClassList, HasUpper: true, Upper: base.UnixMilli(), Meta: normalize.Meta{Items: 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.f.TimeUnit = tc.unit
			p := Policy{SettleWindow: 5 * time.Minute}
			for _, step := range []struct {
				at        time.Time
				immutable bool
			}{
				{base, false},
				{base.Add(5*time.Minute - time.Nanosecond), false},
				{base.Add(5 * time.Minute), false}, // the item's own unit is not over yet
				{base.Add(5*time.Minute + tc.unit), true},
				{base.Add(time.Hour), true},
			} {
				ttl, imm := p.classify(tc.f, step.at)
				if imm != step.immutable {
					t.Errorf("at base+%v: immutable %v (ttl %v), want %v", step.at.Sub(base), imm, ttl, step.immutable)
				}
			}
		})
	}
}

// TestClassifyOff: a negative figure turns that kind of caching off.
func TestClassifyOff(t *testing.T) {
	now := time.Now()
	p := Policy{FreshTTL: -1, ImmutableTTL: -1, NegativeTTL: -1}
	for _, f := range []Facts{
		{Class: normalize.ClassLive},
		{Class: normalize.ClassLookup},
		{Class: normalize.ClassLookup, Meta: normalize.Meta{DataNull: true}},
	} {
		if ttl, imm := p.classify(f, now); ttl != 0 || imm {
			t.Errorf("classify(%+v) = (%v, %v), want (0, false)", f, ttl, imm)
		}
	}
}
