// Command ogen-client runs a client that ogen generated from the edge's
// served document (package api, beside this file in a temporary module)
// against a live edge: every /v1 operation, a cursor chain, each error
// status and 304, answers decoded and validated by the generated code.
// clients_test.go builds and runs it; it reads the edge and its data from
// TG_CLIENT_FIXTURE (JSON) and prints one line per case: "ok", "fail" or
// "op <operationId>" once an operation's answer has decoded.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"ogenclient/api"
)

type fixture struct {
	URL, KeyAll, KeyTxOnly, KeyTiny                 string
	Token, ConditionID, Wallet, TradeTx, ComboTx    string
	Signer, NotFoundWallet, BrokenWallet, UnknownTx string
}

type ctxKey int

const (
	keyOf ctxKey = iota // the bearer token of a call
	padOf               // a header value to pad a call with
)

// security gives each call the key in its context, else the all-routes key.
type security struct{ all string }

func (s security) BearerAuth(ctx context.Context, _ api.OperationName) (api.BearerAuth, error) {
	if k, ok := ctx.Value(keyOf).(string); ok {
		return api.BearerAuth{Token: k}, nil
	}
	return api.BearerAuth{Token: s.all}, nil
}

// recorder is the client's HTTP client: it pads a call whose context asks
// for it and remembers the status of the last answer.
type recorder struct {
	c      *http.Client
	status int
}

func (r *recorder) Do(req *http.Request) (*http.Response, error) {
	if pad, ok := req.Context().Value(padOf).(string); ok {
		req.Header.Set("X-Pad", pad)
	}
	r.status = 0
	resp, err := r.c.Do(req)
	if err == nil {
		r.status = resp.StatusCode
	}
	return resp, err
}

var failed int

func main() {
	var f fixture
	if err := json.Unmarshal([]byte(os.Getenv("TG_CLIENT_FIXTURE")), &f); err != nil {
		fmt.Println("fail fixture:", err)
		os.Exit(1)
	}
	rec := &recorder{c: &http.Client{Timeout: 30 * time.Second}}
	c, err := api.NewClient(f.URL, security{all: f.KeyAll}, api.WithClient(rec))
	if err != nil {
		fmt.Println("fail client:", err)
		os.Exit(1)
	}
	bg := context.Background()
	as := func(key string) context.Context { return context.WithValue(bg, keyOf, key) }

	// check runs one call: it must return no error (the answer decoded and
	// validated) with the status want; then check, if any, looks inside.
	check := func(name, op string, want int, call func() (any, error), inside ...func(any) error) any {
		res, err := call()
		switch {
		case err != nil:
			failed++
			fmt.Printf("fail %s: status %d: %v\n", name, rec.status, err)
		case rec.status != want:
			failed++
			fmt.Printf("fail %s: status %d, want %d (%T)\n", name, rec.status, want, res)
		default:
			for _, in := range inside {
				if err := in(res); err != nil {
					failed++
					fmt.Printf("fail %s: %v\n", name, err)
					return res
				}
			}
			fmt.Printf("ok %s %d %T\n", name, want, res)
			fmt.Printf("op %s\n", op)
		}
		return res
	}

	tok, w := []string{f.Token}, f.Wallet

	// Every GET, with what a client reads in it.
	check("events book", "getOrderBookEvents", 200, func() (any, error) {
		return c.GetOrderBookEvents(bg, api.GetOrderBookEventsParams{TokenId: tok, EventType: []api.GetOrderBookEventsEventTypeItem{api.GetOrderBookEventsEventTypeItemBook}, Order: api.NewOptString("desc"), Limit: api.NewOptInt(1)})
	}, func(r any) error {
		items := r.(*api.OrderBookEventsPageHeaders).Response.Data.Value.Items
		if len(items) != 1 || items[0].Type != api.BookEventOrderBookEvent || len(items[0].BookEvent.Bids)+len(items[0].BookEvent.Asks) == 0 || !items[0].BookEvent.Side.Null {
			return fmt.Errorf("want one book event with levels and side null, got %+v", items)
		}
		return nil
	})
	check("events price_change", "getOrderBookEvents", 200, func() (any, error) {
		return c.GetOrderBookEvents(bg, api.GetOrderBookEventsParams{ConditionId: []string{f.ConditionID}, EventType: []api.GetOrderBookEventsEventTypeItem{api.GetOrderBookEventsEventTypeItemPriceChange}, Limit: api.NewOptInt(20)})
	}, func(r any) error {
		items := r.(*api.OrderBookEventsPageHeaders).Response.Data.Value.Items
		if len(items) == 0 {
			return fmt.Errorf("no price change")
		}
		for _, it := range items {
			if it.Type != api.PriceChangeEventOrderBookEvent || it.PriceChangeEvent.Side == "" || it.PriceChangeEvent.Bids != nil {
				return fmt.Errorf("want price changes with a side and bids null, got %+v", it)
			}
		}
		return nil
	})
	// The cursor chain: events of one token, 20 a page, nextCursor followed
	// until it is null or 10 pages are read.
	pages, cursor := 0, api.OptString{}
	for pages < 10 {
		var next api.NilNextCursor
		r := check(fmt.Sprintf("cursor chain page %d", pages+1), "getOrderBookEvents", 200, func() (any, error) {
			return c.GetOrderBookEvents(bg, api.GetOrderBookEventsParams{TokenId: tok, Limit: api.NewOptInt(20), Cursor: cursor})
		})
		page, ok := r.(*api.OrderBookEventsPageHeaders)
		if !ok {
			break
		}
		pages++
		next = page.Response.Data.Value.NextCursor
		if next.Null {
			break
		}
		cursor = api.NewOptString(string(next.Value))
	}
	if pages < 2 {
		failed++
		fmt.Printf("fail cursor chain: %d pages, want at least 2\n", pages)
	}
	check("activity", "getActivity", 200, func() (any, error) {
		return c.GetActivity(bg, api.GetActivityParams{Address: w, Limit: api.NewOptInt(100)})
	})
	check("deposits-withdrawals", "getDepositsWithdrawals", 200, func() (any, error) {
		return c.GetDepositsWithdrawals(bg, api.GetDepositsWithdrawalsParams{Address: w, Limit: api.NewOptInt(100)})
	})
	check("combo positions closed", "getComboPositionsClosed", 200, func() (any, error) {
		return c.GetComboPositionsClosed(bg, api.GetComboPositionsClosedParams{Address: w, Limit: api.NewOptInt(100)})
	})
	check("positions closed", "getPositionsClosed", 200, func() (any, error) {
		return c.GetPositionsClosed(bg, api.GetPositionsClosedParams{Address: w, Limit: api.NewOptInt(100)})
	})
	check("positions open", "getPositionsOpen", 200, func() (any, error) {
		return c.GetPositionsOpen(bg, api.GetPositionsOpenParams{Address: w, Limit: api.NewOptInt(100)})
	})
	trade := check("tx TRADE", "getTransaction", 200, func() (any, error) {
		return c.GetTransaction(bg, api.GetTransactionParams{TxHash: f.TradeTx})
	}, func(r any) error {
		d := r.(*api.TransactionResponseHeaders).Response.Data
		if d.Null || d.Value.Type != api.TradeTransactionTransaction || d.Value.TradeTransaction.ComboActions != nil {
			return fmt.Errorf("want TRADE with comboActions null, got %+v", d)
		}
		return nil
	})
	check("tx COMBO", "getTransaction", 200, func() (any, error) {
		return c.GetTransaction(bg, api.GetTransactionParams{TxHash: f.ComboTx})
	}, func(r any) error {
		d := r.(*api.TransactionResponseHeaders).Response.Data
		if d.Null || d.Value.Type != api.ComboTransactionTransaction || len(d.Value.ComboTransaction.ComboActions) == 0 || !d.Value.ComboTransaction.MarketId.Null {
			return fmt.Errorf("want COMBO with comboActions and marketId null, got %+v", d)
		}
		return nil
	})
	check("tx unknown", "getTransaction", 200, func() (any, error) {
		return c.GetTransaction(bg, api.GetTransactionParams{TxHash: f.UnknownTx})
	}, func(r any) error {
		if !r.(*api.TransactionResponseHeaders).Response.Data.Null {
			return fmt.Errorf("want data null")
		}
		return nil
	})
	check("wallet address", "getWalletAddress", 200, func() (any, error) {
		return c.GetWalletAddress(bg, api.GetWalletAddressParams{Address: f.Signer})
	})
	check("wallet address none", "getWalletAddress", 200, func() (any, error) {
		return c.GetWalletAddress(bg, api.GetWalletAddressParams{Address: "0x" + strings.Repeat("0", 40)})
	})
	check("order book", "getOrderBook", 200, func() (any, error) {
		return c.GetOrderBook(bg, api.GetOrderBookParams{TokenId: f.Token})
	})
	check("openapi.json", "getOpenAPI", 200, func() (any, error) { return c.GetOpenAPI(bg) })

	// Every HEAD.
	check("HEAD events", "headOrderBookEvents", 200, func() (any, error) {
		return c.HeadOrderBookEvents(bg, api.HeadOrderBookEventsParams{TokenId: tok})
	})
	check("HEAD activity", "headActivity", 200, func() (any, error) {
		return c.HeadActivity(bg, api.HeadActivityParams{Address: w})
	})
	check("HEAD deposits-withdrawals", "headDepositsWithdrawals", 200, func() (any, error) {
		return c.HeadDepositsWithdrawals(bg, api.HeadDepositsWithdrawalsParams{Address: w})
	})
	check("HEAD combo positions closed", "headComboPositionsClosed", 200, func() (any, error) {
		return c.HeadComboPositionsClosed(bg, api.HeadComboPositionsClosedParams{Address: w})
	})
	check("HEAD positions closed", "headPositionsClosed", 200, func() (any, error) {
		return c.HeadPositionsClosed(bg, api.HeadPositionsClosedParams{Address: w})
	})
	check("HEAD positions open", "headPositionsOpen", 200, func() (any, error) {
		return c.HeadPositionsOpen(bg, api.HeadPositionsOpenParams{Address: w})
	})
	check("HEAD tx", "headTransaction", 200, func() (any, error) {
		return c.HeadTransaction(bg, api.HeadTransactionParams{TxHash: f.TradeTx})
	})
	check("HEAD wallet address", "headWalletAddress", 200, func() (any, error) {
		return c.HeadWalletAddress(bg, api.HeadWalletAddressParams{Address: f.Signer})
	})
	check("HEAD order book", "headOrderBook", 200, func() (any, error) {
		return c.HeadOrderBook(bg, api.HeadOrderBookParams{TokenId: f.Token})
	})
	check("HEAD openapi.json", "headOpenAPI", 200, func() (any, error) { return c.HeadOpenAPI(bg) })

	// 304: the ETag of the TRADE answer sent back.
	if h, ok := trade.(*api.TransactionResponseHeaders); ok {
		check("304", "getTransaction", 304, func() (any, error) {
			return c.GetTransaction(bg, api.GetTransactionParams{TxHash: f.TradeTx, IfNoneMatch: api.NewOptString(h.ETag)})
		})
		check("HEAD 304", "headTransaction", 304, func() (any, error) {
			return c.HeadTransaction(bg, api.HeadTransactionParams{TxHash: f.TradeTx, IfNoneMatch: api.NewOptString(h.ETag)})
		})
	}

	// Each error status.
	check("400 no filter", "getOrderBookEvents", 400, func() (any, error) {
		return c.GetOrderBookEvents(bg, api.GetOrderBookEventsParams{Limit: api.NewOptInt(5)})
	})
	check("400 bad address", "getActivity", 400, func() (any, error) {
		return c.GetActivity(bg, api.GetActivityParams{Address: "0x12"})
	})
	check("HEAD 400", "headActivity", 400, func() (any, error) {
		return c.HeadActivity(bg, api.HeadActivityParams{Address: "0x12"})
	})
	check("401", "getTransaction", 401, func() (any, error) {
		return c.GetTransaction(as("not-a-key"), api.GetTransactionParams{TxHash: f.TradeTx})
	})
	check("HEAD 401", "headTransaction", 401, func() (any, error) {
		return c.HeadTransaction(as("not-a-key"), api.HeadTransactionParams{TxHash: f.TradeTx})
	})
	check("403", "getActivity", 403, func() (any, error) {
		return c.GetActivity(as(f.KeyTxOnly), api.GetActivityParams{Address: w})
	})
	check("404 no snapshot", "getOrderBook", 404, func() (any, error) {
		return c.GetOrderBook(bg, api.GetOrderBookParams{TokenId: f.Token, At: api.NewOptInt64(0)})
	})
	check("404 of the legacy host", "getActivity", 404, func() (any, error) {
		return c.GetActivity(bg, api.GetActivityParams{Address: f.NotFoundWallet})
	})
	check("431", "getTransaction", 431, func() (any, error) {
		return c.GetTransaction(context.WithValue(bg, padOf, strings.Repeat("a", 20<<10)), api.GetTransactionParams{TxHash: f.TradeTx})
	})
	check("tiny key's allowance", "getTransaction", 200, func() (any, error) {
		return c.GetTransaction(as(f.KeyTiny), api.GetTransactionParams{TxHash: f.TradeTx})
	})
	check("429", "getTransaction", 429, func() (any, error) {
		return c.GetTransaction(as(f.KeyTiny), api.GetTransactionParams{TxHash: f.TradeTx})
	})
	// 503: the legacy host fails every request for one wallet; the edge
	// answers 502 until the route's breaker opens.
	for i := 0; ; i++ {
		res, err := c.GetPositionsOpen(bg, api.GetPositionsOpenParams{Address: f.BrokenWallet})
		if err != nil || rec.status != 502 || i == 50 {
			check("503 open breaker", "getPositionsOpen", 503, func() (any, error) { return res, err })
			break
		}
	}

	fmt.Printf("done, %d failed\n", failed)
	if failed > 0 {
		os.Exit(1)
	}
}
