package openapitest_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestRoutesAnswerPerContract holds real answers of every one of the eight
// legacy routes, across the simulated data set, to docs/openapi.json.
func TestRoutesAnswerPerContract(t *testing.T) {
	e := newEdge(t)
	wallets := e.sim.Wallets()

	t.Run("orderbook_events", func(t *testing.T) {
		for _, m := range e.sim.Markets() {
			for _, tok := range m.Tokens {
				e.check(t, "/v1/orderbook/events?tokenId="+tok+"&limit=300", http.StatusOK)
				e.check(t, "/v1/orderbook/events?tokenId="+tok+"&eventType=book&order=DESC&limit=1", http.StatusOK)
			}
			e.check(t, "/v1/orderbook/events?conditionId=0x"+strings.ToUpper(m.ConditionID[2:])+"&eventType=price_change&limit=5", http.StatusOK)
		}
		// Past the first page.
		tok := e.sim.Markets()[0].Tokens[0]
		follow(t, e, "/v1/orderbook/events?tokenId="+tok+"&eventType=price_change&limit=50", 3)
	})
	lists := []struct{ name, path string }{
		{"activity", "activity?limit=100"},
		{"deposits_withdrawals", "deposits-withdrawals?limit=100"},
		{"combo_positions_closed", "combo-positions/closed?limit=100"},
		{"positions_closed", "positions/closed?limit=100"},
		{"positions_open", "positions/open?limit=100"},
	}
	for _, l := range lists {
		t.Run(l.name, func(t *testing.T) {
			for _, w := range wallets {
				e.check(t, "/v1/trader/"+w+"/"+l.path, http.StatusOK)
			}
			follow(t, e, "/v1/trader/0x"+strings.ToUpper(wallets[0][2:])+"/"+strings.Replace(l.path, "100", "2", 1), 3)
		})
	}
	t.Run("activity filters", func(t *testing.T) {
		w := wallets[1]
		e.check(t, "/v1/trader/"+w+"/activity?limit=500&fromTimestamp=0&toTimestamp=99999999999&unknown=1", http.StatusOK)
		e.check(t, "/v1/trader/"+w+"/deposits-withdrawals?type=DEPOSIT&minAmount=10.5", http.StatusOK)
	})
	t.Run("tx", func(t *testing.T) {
		trades := e.sim.TradeTxs()
		for i := 0; i < len(trades); i += max(1, len(trades)/60) {
			e.check(t, "/v1/tx/"+trades[i], http.StatusOK)
		}
		for _, h := range e.sim.ComboTxs() {
			e.check(t, "/v1/tx/"+h, http.StatusOK)
		}
		_, body := e.check(t, "/v1/tx/0x"+strings.Repeat("ab", 32), http.StatusOK)
		if string(body) != `{"message":"OK","status_code":"1","data":null}` {
			t.Errorf("unknown hash: %s", body)
		}
	})
	t.Run("wallet_address", func(t *testing.T) {
		for signer := range e.sim.Signers() {
			e.check(t, "/v1/trader/wallet-address/"+signer, http.StatusOK)
		}
		e.check(t, "/v1/trader/wallet-address/"+wallets[0], http.StatusOK)
		_, body := e.check(t, "/v1/trader/wallet-address/0x"+strings.Repeat("0", 40), http.StatusOK)
		if string(body) != `{"message":"OK","status_code":"1","data":{"walletAddress":null}}` {
			t.Errorf("no mapping: %s", body)
		}
	})
	t.Run("not modified", func(t *testing.T) {
		path := "/v1/tx/" + e.sim.ComboTxs()[0]
		resp, _ := e.check(t, path, http.StatusOK)
		e.check(t, path, http.StatusNotModified, "If-None-Match", resp.Header.Get("ETag"))
	})
	t.Run("gzip", func(t *testing.T) {
		// Asked for explicitly, the transport leaves the gzip body alone;
		// only the headers are checked against the document here.
		req, resp, _ := e.do(t, http.MethodGet, "/v1/trader/"+wallets[0]+"/activity?limit=100", keyAll, "Accept-Encoding", "gzip")
		if resp.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("Content-Encoding %q, want gzip", resp.Header.Get("Content-Encoding"))
		}
		_, plain := e.check(t, req.URL.RequestURI(), http.StatusOK)
		resp.Header.Del("Content-Encoding")
		e.v.Response(t, req, resp, plain)
	})
}

// follow validates up to pages pages of a list, passing each nextCursor.
func follow(t *testing.T, e *edge, path string, pages int) {
	t.Helper()
	for range pages {
		_, body := e.check(t, path, http.StatusOK)
		var page struct {
			Data struct {
				NextCursor *string `json:"nextCursor"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		if page.Data.NextCursor == nil {
			return
		}
		base, _, _ := strings.Cut(path, "&cursor=")
		path = base + "&cursor=" + url.QueryEscape(*page.Data.NextCursor)
	}
}
