package orderbook

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
)

// cachedPages holds the variant A pages of one rebuild, as the edge's
// cache would: the snapshot page, and the price change pages by cursor.
type cachedPages struct {
	snapshot []byte
	byCursor map[string][]byte
	at       int64
}

func (c *cachedPages) page(_ context.Context, q Query) ([]byte, error) {
	if q.EventType == evBook {
		return c.snapshot, nil
	}
	if b, ok := c.byCursor[q.Cursor]; ok && q.Limit == maxPageSize {
		return b, nil
	}
	return nil, fmt.Errorf("no cached page for %+v", q)
}

// benchPages builds a snapshot and n price changes in pages of
// maxPageSize, each event with every field and value length of the
// events endpoint's (legacysim's layout), prices in several spellings.
func benchPages(n int) *cachedPages {
	r := rand.New(rand.NewPCG(1, 2))
	const (
		token = "71321045679252212594626385532706912750332728571942532289631379312455583992563"
		frag  = `"marketId":"512345","conditionId":"0x5f65177b394277fd294cd75650044e32ba009a95022d88a0c1d565897d72f8f1","tokenId":"` + token + `","outcome":"Yes",`
		hash  = "0x7c3f5e1a9b2d4c6e8f0a1b3c5d7e9f1a2b4c6d8e0f1a3b5c7d9e1f2a4b6c8d0e"
	)
	cursor := func(i int) string { return fmt.Sprintf("Zm9vYmFy%016dAAA==", i)[:28] }
	item := func(dst []byte, i int, ts int64) []byte {
		dst = append(dst, `{"cursor":"`...)
		dst = append(dst, cursor(i)...)
		dst = append(dst, `",`...)
		dst = append(dst, frag...)
		if i == 0 {
			dst = append(dst, `"eventType":"book","timestamp":`...)
		} else {
			dst = append(dst, `"eventType":"price_change","timestamp":`...)
		}
		dst = strconv.AppendInt(dst, ts, 10)
		dst = append(dst, `,"indexedTimestamp":`...)
		dst = strconv.AppendInt(dst, ts+int64(r.IntN(1500)), 10)
		if i == 0 {
			dst = append(dst, `,"side":null,"price":null,"sizeAfter":null,"bids":[`...)
			for p := 49; p >= 40; p-- {
				dst = fmt.Appendf(dst, `["0.%02d","%d.5"],`, p, 100+p)
			}
			dst = append(dst[:len(dst)-1], `],"asks":[`...)
			for p := 51; p <= 60; p++ {
				dst = fmt.Appendf(dst, `["0.%02d","%d"],`, p, 100+p)
			}
			dst = append(dst[:len(dst)-1], ']')
		} else {
			side, p := "BUY", 30+r.IntN(20)
			if r.IntN(2) == 0 {
				side, p = "SELL", 51+r.IntN(20)
			}
			size := "0"
			if r.IntN(4) != 0 {
				size = strconv.Itoa(r.IntN(100000)) + ".25"
			}
			spell := []string{"", "0", "00"}[r.IntN(3)]
			dst = fmt.Appendf(dst, `,"side":"%s","price":"0.%d%s","sizeAfter":"%s","bids":null,"asks":null`, side, p, spell, size)
		}
		dst = append(dst, `,"sourceHash":"`...)
		dst = append(dst, hash...)
		return append(dst, `"}`...)
	}
	envelope := func(items []byte, next string) []byte {
		b := append([]byte(`{"message":"OK","status_code":"1","data":{"items":[`), items...)
		if next == "" {
			return append(b, `],"nextCursor":null}}`...)
		}
		return append(b, `],"nextCursor":"`+next+`"}}`...)
	}
	ts := int64(1_700_000_000_000)
	c := &cachedPages{snapshot: envelope(item(nil, 0, ts), ""), byCursor: map[string][]byte{}}
	from := cursor(0)
	for i := 1; i <= n; i += maxPageSize {
		var items []byte
		last := min(n, i+maxPageSize-1)
		for j := i; j <= last; j++ {
			if j > i {
				items = append(items, ',')
			}
			ts += int64(r.IntN(3))
			items = item(items, j, ts)
		}
		next := ""
		if last < n {
			next = cursor(last)
		}
		c.byCursor[from] = envelope(items, next)
		from = next
	}
	c.at = ts
	return c
}

// BenchmarkRebuild100k rebuilds a book over 100,000 price changes in 10
// cached pages of 10,000 (about 45 MB of JSON).
func BenchmarkRebuild100k(b *testing.B) {
	pages := benchPages(100_000)
	size := len(pages.snapshot)
	for _, p := range pages.byCursor {
		size += len(p)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		book, err := Rebuild(context.Background(), pages.page, "71321045679252212594626385532706912750332728571942532289631379312455583992563", pages.at, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if book.EventsApplied != 100_000 {
			b.Fatalf("%d events applied", book.EventsApplied)
		}
	}
}
