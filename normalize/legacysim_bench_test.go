package normalize_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"tradergate/legacysim"
	"tradergate/normalize"
)

// BenchmarkRewriteLegacySim rewrites pages as the simulated legacy host
// serves them, what the edge's miss path pays per page. Unlike the pages of
// BenchmarkRewrite, which repeat one item, their items vary as real ones
// do. The host answers in process: only the rewrite is timed.
func BenchmarkRewriteLegacySim(b *testing.B) {
	end := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	sim := legacysim.New(legacysim.Config{Seed: 1, End: end, Now: func() time.Time { return end }})
	wallet := "/open-api/v1/trader/" + sim.Wallets()[0]
	book := url.Values{"marketId": {sim.Markets()[0].ID}}
	list := func(shape normalize.Shape, timeField string) normalize.Options {
		return normalize.Options{Shape: shape, ShiftCents: true, TimeField: timeField}
	}
	cases := []struct {
		name, target string
		opt          normalize.Options
	}{
		{"Activity/20", wallet + "/activity?limit=20", list(normalize.Activity, "blockTimestamp")},
		{"Activity/100", wallet + "/activity?limit=100", list(normalize.Activity, "blockTimestamp")},
		{"Transfers/20", wallet + "/deposits-withdrawals?limit=20", list(normalize.Transfers, "blockTimestamp")},
		{"ComboPositions", wallet + "/combo-positions/closed", list(normalize.ComboPositions, "recentTradeTime")},
		{"PositionsOpen", wallet + "/positions/open", list(normalize.Positions, "recentTradeTime")},
		{"Transaction/Trade", "/open-api/v1/tx/" + sim.TradeTxs()[0], normalize.Options{Shape: normalize.Transaction, ShiftCents: true}},
		{"Transaction/Combo", "/open-api/v1/tx/" + sim.ComboTxs()[0], normalize.Options{Shape: normalize.Transaction, ShiftCents: true}},
		{"OrderBook/1000", "/open-api/v1/orderbook/events?" + book.Encode(), list(normalize.OrderBook, "timestamp")},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			rec := httptest.NewRecorder()
			sim.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, c.target, nil))
			if rec.Code != http.StatusOK {
				b.Fatalf("%s: status %d: %s", c.target, rec.Code, rec.Body)
			}
			src := rec.Body.Bytes()
			dst := make([]byte, 0, 2*len(src))
			if _, meta, err := normalize.Rewrite(dst, src, c.opt); err != nil || meta.DataNull {
				b.Fatalf("%s: %v, Meta %+v", c.target, err, meta)
			}
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := normalize.Rewrite(dst[:0], src, c.opt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
