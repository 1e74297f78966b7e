package legacysim

import (
	"encoding/json"
	"math/big"
	"net/url"
	"testing"
	"time"
)

type varietyEvent struct {
	EventType string      `json:"eventType"`
	Timestamp int64       `json:"timestamp"`
	Side      *string     `json:"side"`
	Price     *string     `json:"price"`
	SizeAfter *string     `json:"sizeAfter"`
	Bids      [][2]string `json:"bids"`
	Asks      [][2]string `json:"asks"`
}

// TestOrderBookVariety checks that each case variety.go promises occurs
// in one token's stream, by replaying it with levels keyed by value.
func TestOrderBookVariety(t *testing.T) {
	s, srv := fixed(t, Config{Markets: 1, History: 2 * time.Hour, OrderBookVariety: true})
	tok := s.Markets()[0].Tokens[0]
	var evs []varietyEvent
	for _, raw := range walk(t, srv, obPath, url.Values{"tokenId": {tok}, "limit": {"10000"}}, 10000) {
		var e varietyEvent
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}

	value := func(s string) string {
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("decimal %q", s)
		}
		return r.RatString()
	}
	var (
		books     [2]map[string]string // BUY, SELL: size by price value
		spellings = map[string]map[string]bool{}
		removed   [2]map[string]bool
		seen      = map[string]int{}
		run, gap  int
		prevTs    int64 = -1
	)
	note := func(what string) { seen[what]++ }
	spell := func(p string) {
		v := value(p)
		if spellings[v] == nil {
			spellings[v] = map[string]bool{}
		}
		spellings[v][p] = true
		if len(spellings[v]) > 1 {
			note("one price, several spellings")
		}
	}
	for _, e := range evs {
		if e.Timestamp == prevTs {
			note("events in one millisecond")
		}
		prevTs = e.Timestamp
		if e.EventType == "book" {
			next := [2]map[string]string{{}, {}}
			for sd, ls := range [2][][2]string{e.Bids, e.Asks} {
				for _, l := range ls {
					spell(l[0])
					next[sd][value(l[0])] = l[1]
				}
			}
			if books[0] != nil {
				note("snapshot")
				for sd := range books {
					for p := range next[sd] {
						if _, ok := books[sd][p]; !ok {
							note("snapshot that disagrees with the changes before it")
						}
					}
				}
			}
			books = next
			removed = [2]map[string]bool{{}, {}}
			gap, run = max(gap, run), 0
			continue
		}
		run++
		sd := 1
		if *e.Side == "BUY" {
			sd = 0
			note("BUY")
		} else {
			note("SELL")
		}
		spell(*e.Price)
		p := value(*e.Price)
		if books[0] == nil {
			t.Fatal("price change before the first snapshot")
		}
		_, had := books[sd][p]
		if value(*e.SizeAfter) == "0" {
			if *e.SizeAfter != "0" {
				note("removal spelled " + *e.SizeAfter)
			}
			if had {
				note("removal")
				removed[sd][p] = true
			} else {
				note("removal of an absent level")
			}
			delete(books[sd], p)
			continue
		}
		if !had && removed[sd][p] {
			note("re-add")
		}
		books[sd][p] = *e.SizeAfter
		if bid, ask := best(books[0], true), best(books[1], false); bid != nil && ask != nil && bid.Cmp(ask) >= 0 {
			note("crossed")
		}
	}
	for _, what := range []string{"one price, several spellings", "events in one millisecond", "snapshot",
		"snapshot that disagrees with the changes before it", "BUY", "SELL", "removal", "removal spelled 0.00",
		"removal of an absent level", "re-add", "crossed"} {
		if seen[what] == 0 {
			t.Errorf("no %s in %d events", what, len(evs))
		}
	}
	if gap <= 10000 {
		t.Errorf("longest run of changes between snapshots is %d, want more than a page of 10000", gap)
	}
}

func best(side map[string]string, highest bool) *big.Rat {
	var b *big.Rat
	for p := range side {
		r, _ := new(big.Rat).SetString(p)
		if b == nil || (r.Cmp(b) > 0) == highest {
			b = r
		}
	}
	return b
}
