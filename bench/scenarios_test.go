package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"tradergate/bench/fixture"
)

func testFixtures() fixture.Fixtures {
	f := fixture.Fixtures{End: 1_700_000_000}
	for i := range 16 {
		f.Wallets = append(f.Wallets, fmt.Sprintf("0x%040x", i))
		f.Tokens = append(f.Tokens, fmt.Sprint(1000+i))
	}
	for i := range 1500 {
		f.TradeTxs = append(f.TradeTxs, fmt.Sprintf("0x%064x", i))
	}
	f.ComboTxs = []string{fmt.Sprintf("0x%064x", 99999)}
	return f
}

func TestZipfKeys(t *testing.T) {
	f := testFixtures()
	keys := zipfKeys(f, 10000, 1)
	if len(keys) != 10000 {
		t.Fatalf("%d keys", len(keys))
	}
	seen := map[string]bool{}
	kinds := map[string]int{}
	for _, k := range keys {
		if seen[k] {
			t.Fatalf("duplicate key %s", k)
		}
		seen[k] = true
		switch {
		case strings.HasPrefix(k, "/v1/tx/"):
			kinds["tx"]++
		case strings.Contains(k, "/activity?toTimestamp="):
			kinds["range"]++
		case strings.Contains(k, "/activity?limit="):
			kinds["head"]++
		case strings.Contains(k, "/positions/open"):
			kinds["open"]++
		case strings.HasPrefix(k, "/v1/orderbook/events?"):
			kinds["book"]++
		default:
			t.Fatalf("unexpected key %s", k)
		}
	}
	// Only 1501 transactions exist: the settled ranges take the rest of
	// their 20%.
	want := map[string]int{"tx": 1501, "range": 3000 + 499, "head": 1000, "open": 1000, "book": 3000}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("%s: %d keys, want %d", k, kinds[k], n)
		}
	}
	if !slices.Equal(keys, zipfKeys(f, 10000, 1)) {
		t.Error("same seed, different universe")
	}
	if slices.Equal(keys, zipfKeys(f, 10000, 2)) {
		t.Error("different seeds, same order")
	}
	// Shuffled: the most popular 100 are not all one kind.
	top := map[string]bool{}
	for _, k := range keys[:100] {
		top[strings.SplitN(k, "/", 4)[2]] = true
	}
	if len(top) < 2 {
		t.Errorf("top ranks are all one kind: %v", top)
	}
}

func TestBuildScenarios(t *testing.T) {
	f := testFixtures()
	scs := buildScenarios(f, scenarioOptions{zipfKeys: 1000, stampedeRounds: 4, stampedeConns: 256, seed: 1})
	var names []string
	for _, sc := range scs {
		names = append(names, sc.name)
	}
	want := "hit-tx hit-tx-gzip hit-activity20 hit-activity20-gzip hit-orderbook1000 hit-orderbook1000-gzip hit-activity20-redis miss miss-full stampede zipf"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("scenarios %q", got)
	}
	st := scenarioByName(scs, "stampede")
	if len(st.urls) != 4 || st.conns != 256 || len(slices.Compact(slices.Clone(st.urls))) != 4 {
		t.Fatalf("stampede urls %v conns %d", st.urls, st.conns)
	}
	if act := scenarioByName(scs, "hit-activity20").urls[0]; act != "/v1/trader/"+f.Wallets[0]+"/activity?toTimestamp=1699996400&limit=20" {
		t.Fatalf("activity page %s", act)
	}
}

func TestSelected(t *testing.T) {
	for _, tc := range []struct {
		name, only string
		want       bool
	}{
		{"hit-tx", "", true},
		{"hit-tx-gzip", "hit", true},
		{"hit-activity20-redis", "hit-activity20", true},
		{"miss", "hit,miss", true},
		{"zipf", "hit, miss", false},
		{"stampede", " stampede ", true},
	} {
		if got := selected(tc.name, tc.only); got != tc.want {
			t.Errorf("selected(%q, %q) = %v", tc.name, tc.only, got)
		}
	}
}
