package normalize

import (
	"fmt"
	"strings"
	"testing"
)

// Speed goals: order book pages, whose data passes
// through, at 1 GB/s or more; field rewrites at 200 MB/s or more per core.
// Run: go test -run='^$' -bench=. -benchtime=2s ./normalize/

const (
	benchAddr   = "0x56687bf447db6ffa42ffe2204a05edaa20f55839"
	benchTx     = "0x9b3c1f2a7e4d5c6b8a9f0e1d2c3b4a5968778695a4b3c2d1e0f9a8b7c6d5e4f3"
	benchToken  = "21742633143463906290569050155826241533067272736897614950488156847949938836455"
	benchCond   = "0xe3b1bc389210504ebcb9cffe4b0ed06ccac50561e0f24abb6379984cec030f00"
	benchCursor = "eyJibG9ja1RpbWVzdGFtcCI6MTczMDAwMDAwMCwiaWQiOjEyMzQ1Njc4fQ=="
)

func benchList(items []string) []byte {
	return []byte(`{"success":true,"code":"0","message":"success","data":{"items":[` +
		strings.Join(items, ",") + `],"nextCursor":"` + benchCursor + `"}}`)
}

// benchOrderBook is a page of n events, one book snapshot in ten.
func benchOrderBook(n int) []byte {
	items := make([]string, n)
	for i := range items {
		ts := 1730000000000 + int64(i)*250
		if i%10 == 0 {
			items[i] = fmt.Sprintf(`{"cursor":"%s","marketId":"561234","conditionId":"%s","tokenId":"%s","outcome":"Yes","eventType":"book","timestamp":%d,"indexedTimestamp":%d,"side":null,"price":null,"sizeAfter":null,"bids":[["0.52","1200.5"],["0.51","300"],["0.5","10"],["0.49","77.25"]],"asks":[["0.53","100"],["0.54","2500"],["0.55","12.5"]],"sourceHash":"%s"}`,
				benchCursor, benchCond, benchToken, ts, ts+180, benchTx)
		} else {
			items[i] = fmt.Sprintf(`{"cursor":"%s","marketId":"561234","conditionId":"%s","tokenId":"%s","outcome":"Yes","eventType":"price_change","timestamp":%d,"indexedTimestamp":%d,"side":"BUY","price":"0.52","sizeAfter":"1200.5","bids":null,"asks":null,"sourceHash":"%s"}`,
				benchCursor, benchCond, benchToken, ts, ts+180, benchTx)
		}
	}
	return benchList(items)
}

func benchActivity(n int) []byte {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(`{"blockTimestamp":%d,"actionType":"Buy","price":"78.5","size":"125.4","fee":0.0125,"usdcSize":"98.44","netSharesTransferred":"125.4","txHash":"%s","tokenId":"%s","marketId":"561234","marketSlug":"will-the-fed-cut-rates-in-december","eventSlug":"fed-decision-in-december","conditionId":"%s","marketTitle":"Will the Fed cut rates in December?","positionSide":"Yes","outcomeIndex":0,"logo":"https://cdn.example.com/markets/fed-december.png","traderAddress":"%s","liquidityRole":"TAKER"}`,
			1730000000+i, benchTx, benchToken, benchCond, benchAddr)
	}
	return benchList(items)
}

func benchTransfers(n int) []byte {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(`{"txHash":"%s","type":"deposit","amount":"%d.25","blockTimestamp":%d,"address":"%s"}`,
			benchTx, 100+i, 1730000000+i, benchAddr)
	}
	return benchList(items)
}

func benchPositions(n int) []byte {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(`{"marketId":"561234","marketSlug":"will-the-fed-cut-rates-in-december","eventSlug":"fed-decision-in-december","conditionId":"%s","marketTitle":"Will the Fed cut rates in December?","logo":"https://cdn.example.com/markets/fed-december.png","closed":false,"tokenId":"%s","positionSide":"Yes","outcomeIndex":0,"balance":"250","avgPrice":"61.2","currentPrice":"78.5","avgExit":"0","totalInvested":"153","totalBought":"250","value":"196.25","unrealizedPnl":"43.25","realizedPnl":"0","totalPnl":"43.25","percentPnl":"28.27","recentTradeTime":%d}`,
			benchCond, benchToken, 1730000000+i)
	}
	return benchList(items)
}

func benchCombo(n int) []byte {
	leg := func(i int) string {
		return fmt.Sprintf(`{"comboPositionId":"cp-88412","legIndex":%d,"legPositionId":"%s","marketId":"561234","marketTitle":"Will the Fed cut rates in December?","logo":"https://cdn.example.com/markets/fed-december.png","marketSlug":"will-the-fed-cut-rates-in-december","eventSlug":"fed-decision-in-december","outcomeIndex":0,"outcome":"Yes","outcomePrice":"78.5","resolved":true}`, i, benchToken)
	}
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(`{"comboPositionId":"cp-88412","comboConditionId":"%s","amount":"40","avgPrice":"22.5","realizedPnl":"31","totalBought":"40","balance":"0","totalFee":"0.4","currentPrice":"100","unrealizedPnl":"0","totalPnl":"31","percentPnl":"344.4","balanceTimestamp":%d,"recentTradeTime":%d,"firstTradeTime":%d,"legs":[%s,%s,%s]}`,
			benchCond, 1730000000+i, 1730000000+i, 1729990000, leg(0), leg(1), leg(2))
	}
	return benchList(items)
}

func benchTransaction(fills int) []byte {
	fs := make([]string, fills)
	for i := range fs {
		fs[i] = fmt.Sprintf(`{"actionType":"Sell","assetId":"%s","shares":"%d","price":"78.5","txValue":"78.5","actor":"%s","txHash":"%s","blockTimestamp":1730000000,"fee":0.05,"marketId":"561234","marketSlug":"will-the-fed-cut-rates-in-december","eventSlug":"fed-decision-in-december","marketTitle":"Will the Fed cut rates in December?","positionSide":"Yes","outcomeIndex":0,"marketLogo":"https://cdn.example.com/markets/fed-december.png","liquidityRole":"MAKER"}`,
			benchToken, 100+i, benchAddr, benchTx)
	}
	return []byte(fmt.Sprintf(`{"success":true,"code":"0","message":"success","data":{"txHash":"%s","blockNumber":63811204,"blockTimestamp":1730000000,"profileAddress":"%s","sourceType":"TRADE","actionType":"Buy","sentence":"Bought 600 Yes shares at 78.5c for $471.00","marketSlug":"will-the-fed-cut-rates-in-december","marketId":"561234","actions":[%s]}}`,
		benchTx, benchAddr, strings.Join(fs, ",")))
}

func BenchmarkRewrite(b *testing.B) {
	cases := []struct {
		name string
		src  []byte
		opt  Options
	}{
		{"OrderBook/1000", benchOrderBook(1000), Options{Shape: OrderBook}},
		{"OrderBook/1000/TimeField", benchOrderBook(1000), Options{Shape: OrderBook, TimeField: "timestamp"}},
		{"Activity/20", benchActivity(20), Options{Shape: Activity, ShiftCents: true, TimeField: "blockTimestamp"}},
		{"Activity/100", benchActivity(100), Options{Shape: Activity, ShiftCents: true, TimeField: "blockTimestamp"}},
		{"Transfers/20", benchTransfers(20), Options{Shape: Transfers, TimeField: "blockTimestamp"}},
		{"Positions/20", benchPositions(20), Options{Shape: Positions, ShiftCents: true, TimeField: "recentTradeTime"}},
		{"ComboPositions/20", benchCombo(20), Options{Shape: ComboPositions, ShiftCents: true, TimeField: "recentTradeTime"}},
		{"Transaction/6", benchTransaction(6), Options{Shape: Transaction, ShiftCents: true}},
		{"WalletAddress", []byte(`{"success":true,"code":"0","message":"success","data":{"walletAddress":"` + benchAddr + `"}}`), Options{Shape: WalletAddress}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			dst := make([]byte, 0, 2*len(c.src))
			b.SetBytes(int64(len(c.src)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := Rewrite(dst[:0], c.src, c.opt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkShiftCents(b *testing.B) {
	src := []byte("78.5")
	dst := make([]byte, 0, 32)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ShiftCents(dst[:0], src); err != nil {
			b.Fatal(err)
		}
	}
}
