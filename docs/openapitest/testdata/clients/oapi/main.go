// Command oapi-client runs a client that oapi-codegen generated from the
// edge's served document (package api, beside this file in a temporary
// module) against a live edge: every /v1 operation, a cursor chain, each
// error status and 304. The generated code binds the headers and decodes
// the body of each answer; this program decodes the body again into the
// same generated type with unknown fields refused. clients_test.go builds
// and runs it; it reads the edge and its data from TG_CLIENT_FIXTURE
// (JSON) and prints one line per case: "ok", "fail" or "op <operationId>"
// once an operation's answer has decoded.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"strings"
	"time"

	"oapiclient/api"
)

type fixture struct {
	URL, KeyAll, KeyTxOnly, KeyTiny                 string
	Token, ConditionID, Wallet, TradeTx, ComboTx    string
	Signer, NotFoundWallet, BrokenWallet, UnknownTx string
}

var failed int

// key sets the bearer token of one call, over the client's default.
func key(k string) api.RequestEditorFn {
	return func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+k)
		return nil
	}
}

// strictly decodes into v with unknown fields refused.
func strictly(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// decoded checks a generated XResponse: its status is want, the body was
// decoded into JSON<status> and decodes again strictly, and the headers
// of the status, where the document declares some, were bound.
func decoded(res any, want int) error {
	rv := reflect.ValueOf(res).Elem()
	status := rv.FieldByName("HTTPResponse").Interface().(*http.Response).StatusCode
	if status != want {
		return fmt.Errorf("status %d, want %d: %s", status, want, rv.FieldByName("Body").Bytes())
	}
	body := rv.FieldByName("Body").Bytes()
	if jf := rv.FieldByName(fmt.Sprintf("JSON%d", status)); jf.IsValid() {
		if jf.IsNil() {
			return fmt.Errorf("JSON%d not decoded", status)
		}
		if err := strictly(body, reflect.New(jf.Type().Elem()).Interface()); err != nil {
			return fmt.Errorf("JSON%d: %v", status, err)
		}
	} else if len(body) > 0 {
		return fmt.Errorf("a %d body the document does not declare", status)
	}
	if hf := rv.FieldByName(fmt.Sprintf("Headers%d", status)); hf.IsValid() && hf.IsNil() {
		return fmt.Errorf("Headers%d not bound", status)
	}
	return nil
}

func main() {
	var f fixture
	if err := json.Unmarshal([]byte(os.Getenv("TG_CLIENT_FIXTURE")), &f); err != nil {
		fmt.Println("fail fixture:", err)
		os.Exit(1)
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	c, err := api.NewClientWithResponses(f.URL, api.WithHTTPClient(hc), api.WithRequestEditorFn(key(f.KeyAll)))
	if err != nil {
		fmt.Println("fail client:", err)
		os.Exit(1)
	}
	bg := context.Background()

	check := func(name, op string, want int, call func() (any, error), inside ...func(any) error) any {
		res, err := call()
		if err == nil {
			err = decoded(res, want)
		}
		for _, in := range inside {
			if err == nil {
				err = in(res)
			}
		}
		if err != nil {
			failed++
			fmt.Printf("fail %s: %v\n", name, err)
			return nil
		}
		fmt.Printf("ok %s %d %T\n", name, want, res)
		fmt.Printf("op %s\n", op)
		return res
	}
	ptr := func(v int) *int { return &v }
	tok, w := &[]string{f.Token}, f.Wallet

	check("events book", "getOrderBookEvents", 200, func() (any, error) {
		return c.GetOrderBookEventsWithResponse(bg, &api.GetOrderBookEventsParams{TokenId: tok, EventType: &[]api.GetOrderBookEventsParamsEventType{"book"}, Limit: ptr(1)})
	}, func(r any) error {
		items := r.(*api.GetOrderBookEventsResponse).JSON200.Data.Items
		if len(items) != 1 {
			return fmt.Errorf("want one event, got %d", len(items))
		}
		v, err := items[0].ValueByDiscriminator()
		b, ok := v.(api.BookEvent)
		if err != nil || !ok || len(b.Bids)+len(b.Asks) == 0 || b.Side != nil {
			return fmt.Errorf("want a book event with levels and side null, got %#v (%v)", v, err)
		}
		raw, _ := items[0].MarshalJSON()
		return strictly(raw, new(api.BookEvent))
	})
	check("events price_change", "getOrderBookEvents", 200, func() (any, error) {
		return c.GetOrderBookEventsWithResponse(bg, &api.GetOrderBookEventsParams{ConditionId: &[]string{f.ConditionID}, EventType: &[]api.GetOrderBookEventsParamsEventType{"price_change"}, Limit: ptr(20)})
	}, func(r any) error {
		items := r.(*api.GetOrderBookEventsResponse).JSON200.Data.Items
		if len(items) == 0 {
			return fmt.Errorf("no price change")
		}
		for _, it := range items {
			v, err := it.ValueByDiscriminator()
			p, ok := v.(api.PriceChangeEvent)
			if err != nil || !ok || p.Bids != nil {
				return fmt.Errorf("want price changes with bids null, got %#v (%v)", v, err)
			}
			raw, _ := it.MarshalJSON()
			if err := strictly(raw, new(api.PriceChangeEvent)); err != nil {
				return err
			}
		}
		return nil
	})
	pages := 0
	var cursor *api.CursorQuery
	for pages < 10 {
		r := check(fmt.Sprintf("cursor chain page %d", pages+1), "getOrderBookEvents", 200, func() (any, error) {
			return c.GetOrderBookEventsWithResponse(bg, &api.GetOrderBookEventsParams{TokenId: tok, Limit: ptr(20), Cursor: cursor})
		})
		if r == nil {
			break
		}
		pages++
		next := r.(*api.GetOrderBookEventsResponse).JSON200.Data.NextCursor
		if next == nil {
			break
		}
		cursor = next
	}
	if pages < 2 {
		failed++
		fmt.Printf("fail cursor chain: %d pages, want at least 2\n", pages)
	}
	check("activity", "getActivity", 200, func() (any, error) {
		return c.GetActivityWithResponse(bg, w, &api.GetActivityParams{Limit: ptr(100)})
	})
	check("deposits-withdrawals", "getDepositsWithdrawals", 200, func() (any, error) {
		return c.GetDepositsWithdrawalsWithResponse(bg, w, &api.GetDepositsWithdrawalsParams{Limit: ptr(100)})
	})
	check("combo positions closed", "getComboPositionsClosed", 200, func() (any, error) {
		return c.GetComboPositionsClosedWithResponse(bg, w, &api.GetComboPositionsClosedParams{Limit: ptr(100)})
	})
	check("positions closed", "getPositionsClosed", 200, func() (any, error) {
		return c.GetPositionsClosedWithResponse(bg, w, &api.GetPositionsClosedParams{Limit: ptr(100)})
	})
	check("positions open", "getPositionsOpen", 200, func() (any, error) {
		return c.GetPositionsOpenWithResponse(bg, w, &api.GetPositionsOpenParams{Limit: ptr(100)})
	})
	trade := check("tx TRADE", "getTransaction", 200, func() (any, error) {
		return c.GetTransactionWithResponse(bg, f.TradeTx, nil)
	}, func(r any) error {
		d := r.(*api.GetTransactionResponse).JSON200.Data
		v, err := d.ValueByDiscriminator()
		t, ok := v.(api.TradeTransaction)
		if err != nil || !ok || t.ComboActions != nil {
			return fmt.Errorf("want TRADE with comboActions null, got %#v (%v)", v, err)
		}
		raw, _ := d.MarshalJSON()
		return strictly(raw, new(api.TradeTransaction))
	})
	check("tx COMBO", "getTransaction", 200, func() (any, error) {
		return c.GetTransactionWithResponse(bg, f.ComboTx, nil)
	}, func(r any) error {
		d := r.(*api.GetTransactionResponse).JSON200.Data
		v, err := d.ValueByDiscriminator()
		t, ok := v.(api.ComboTransaction)
		if err != nil || !ok || len(t.ComboActions) == 0 || t.MarketId != nil {
			return fmt.Errorf("want COMBO with comboActions and marketId null, got %#v (%v)", v, err)
		}
		raw, _ := d.MarshalJSON()
		return strictly(raw, new(api.ComboTransaction))
	})
	check("tx unknown", "getTransaction", 200, func() (any, error) {
		return c.GetTransactionWithResponse(bg, f.UnknownTx, nil)
	}, func(r any) error {
		if r.(*api.GetTransactionResponse).JSON200.Data != nil {
			return fmt.Errorf("want data null")
		}
		return nil
	})
	check("wallet address", "getWalletAddress", 200, func() (any, error) {
		return c.GetWalletAddressWithResponse(bg, f.Signer, nil)
	})
	check("wallet address none", "getWalletAddress", 200, func() (any, error) {
		return c.GetWalletAddressWithResponse(bg, "0x"+strings.Repeat("0", 40), nil)
	})
	check("order book", "getOrderBook", 200, func() (any, error) {
		return c.GetOrderBookWithResponse(bg, &api.GetOrderBookParams{TokenId: f.Token})
	})
	check("openapi.json", "getOpenAPI", 200, func() (any, error) { return c.GetOpenAPIWithResponse(bg) })

	check("HEAD events", "headOrderBookEvents", 200, func() (any, error) {
		return c.HeadOrderBookEventsWithResponse(bg, &api.HeadOrderBookEventsParams{TokenId: tok})
	})
	check("HEAD activity", "headActivity", 200, func() (any, error) {
		return c.HeadActivityWithResponse(bg, w, nil)
	})
	check("HEAD deposits-withdrawals", "headDepositsWithdrawals", 200, func() (any, error) {
		return c.HeadDepositsWithdrawalsWithResponse(bg, w, nil)
	})
	check("HEAD combo positions closed", "headComboPositionsClosed", 200, func() (any, error) {
		return c.HeadComboPositionsClosedWithResponse(bg, w, nil)
	})
	check("HEAD positions closed", "headPositionsClosed", 200, func() (any, error) {
		return c.HeadPositionsClosedWithResponse(bg, w, nil)
	})
	check("HEAD positions open", "headPositionsOpen", 200, func() (any, error) {
		return c.HeadPositionsOpenWithResponse(bg, w, nil)
	})
	check("HEAD tx", "headTransaction", 200, func() (any, error) {
		return c.HeadTransactionWithResponse(bg, f.TradeTx, nil)
	})
	check("HEAD wallet address", "headWalletAddress", 200, func() (any, error) {
		return c.HeadWalletAddressWithResponse(bg, f.Signer, nil)
	})
	check("HEAD order book", "headOrderBook", 200, func() (any, error) {
		return c.HeadOrderBookWithResponse(bg, &api.HeadOrderBookParams{TokenId: f.Token})
	})
	check("HEAD openapi.json", "headOpenAPI", 200, func() (any, error) { return c.HeadOpenAPIWithResponse(bg) })

	if r, ok := trade.(*api.GetTransactionResponse); ok && r.Headers200 != nil {
		etag := api.IfNoneMatch(r.Headers200.ETag)
		check("304", "getTransaction", 304, func() (any, error) {
			return c.GetTransactionWithResponse(bg, f.TradeTx, &api.GetTransactionParams{IfNoneMatch: &etag})
		})
		check("HEAD 304", "headTransaction", 304, func() (any, error) {
			return c.HeadTransactionWithResponse(bg, f.TradeTx, &api.HeadTransactionParams{IfNoneMatch: &etag})
		})
	}

	check("400 no filter", "getOrderBookEvents", 400, func() (any, error) {
		return c.GetOrderBookEventsWithResponse(bg, &api.GetOrderBookEventsParams{Limit: ptr(5)})
	})
	check("400 bad address", "getActivity", 400, func() (any, error) {
		return c.GetActivityWithResponse(bg, "0x12", nil)
	})
	check("HEAD 400", "headActivity", 400, func() (any, error) {
		return c.HeadActivityWithResponse(bg, "0x12", nil)
	})
	check("401", "getTransaction", 401, func() (any, error) {
		return c.GetTransactionWithResponse(bg, f.TradeTx, nil, key("not-a-key"))
	})
	check("HEAD 401", "headTransaction", 401, func() (any, error) {
		return c.HeadTransactionWithResponse(bg, f.TradeTx, nil, key("not-a-key"))
	})
	check("403", "getActivity", 403, func() (any, error) {
		return c.GetActivityWithResponse(bg, w, nil, key(f.KeyTxOnly))
	})
	at := int64(0)
	check("404 no snapshot", "getOrderBook", 404, func() (any, error) {
		return c.GetOrderBookWithResponse(bg, &api.GetOrderBookParams{TokenId: f.Token, At: &at})
	})
	check("404 of the legacy host", "getActivity", 404, func() (any, error) {
		return c.GetActivityWithResponse(bg, f.NotFoundWallet, nil)
	})
	check("431", "getTransaction", 431, func() (any, error) {
		return c.GetTransactionWithResponse(bg, f.TradeTx, nil, func(_ context.Context, req *http.Request) error {
			req.Header.Set("X-Pad", strings.Repeat("a", 20<<10))
			return nil
		})
	})
	check("tiny key's allowance", "getTransaction", 200, func() (any, error) {
		return c.GetTransactionWithResponse(bg, f.TradeTx, nil, key(f.KeyTiny))
	})
	check("429", "getTransaction", 429, func() (any, error) {
		return c.GetTransactionWithResponse(bg, f.TradeTx, nil, key(f.KeyTiny))
	})
	for i := 0; ; i++ {
		res, err := c.GetPositionsOpenWithResponse(bg, f.BrokenWallet, nil)
		if err != nil || res.StatusCode() != 502 || i == 50 {
			check("503 open breaker", "getPositionsOpen", 503, func() (any, error) { return res, err })
			break
		}
	}

	fmt.Printf("done, %d failed\n", failed)
	if failed > 0 {
		os.Exit(1)
	}
}
