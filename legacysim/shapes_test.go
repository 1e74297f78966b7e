package legacysim

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// Field lists of normalize/SHAPES.md, in order, with the JSON type each
// field must have: s string, d decimal string, i integer, n number (not a
// string), b bool, a array, 0 null; a trailing ? also allows null.
var (
	shapeOrderbook = []string{"cursor s", "marketId s", "conditionId s", "tokenId s", "outcome s?", "eventType s",
		"timestamp i", "indexedTimestamp i", "side s?", "price d?", "sizeAfter d?", "bids a?", "asks a?", "sourceHash s?"}
	shapeActivity = []string{"blockTimestamp i", "actionType s", "price d", "size d", "fee n", "usdcSize d",
		"netSharesTransferred d", "txHash s", "tokenId s", "marketId s", "marketSlug s", "eventSlug s", "conditionId s",
		"marketTitle s", "positionSide s", "outcomeIndex i", "logo s", "traderAddress s", "liquidityRole s?"}
	shapeTransfer = []string{"txHash s", "type s", "amount d", "blockTimestamp i", "address s"}
	shapeCombo    = []string{"comboPositionId s", "comboConditionId s", "amount d", "avgPrice d", "realizedPnl d",
		"totalBought d", "balance d", "totalFee d", "currentPrice d", "unrealizedPnl d", "totalPnl d", "percentPnl d",
		"balanceTimestamp i", "recentTradeTime i", "firstTradeTime i", "legs a"}
	shapeLeg = []string{"comboPositionId s", "legIndex i", "legPositionId s", "marketId s", "marketTitle s", "logo s",
		"marketSlug s", "eventSlug s", "outcomeIndex i", "outcome s", "outcomePrice d", "resolved b"}
	shapePosition = []string{"marketId s", "marketSlug s", "eventSlug s", "conditionId s", "marketTitle s", "logo s",
		"closed b", "tokenId s", "positionSide s", "outcomeIndex i", "balance d", "avgPrice d", "currentPrice d",
		"avgExit d", "totalInvested d", "totalBought d", "value d", "unrealizedPnl d", "realizedPnl d", "totalPnl d",
		"percentPnl d?", "recentTradeTime i"}
	shapeTx = []string{"txHash s", "blockNumber i", "blockTimestamp i", "profileAddress s", "sourceType s",
		"actionType s", "sentence s", "marketSlug s", "marketId s", "actions a"}
	shapeTradeFill = []string{"actionType s", "assetId s", "shares d", "price d", "txValue d", "actor s", "txHash s",
		"blockTimestamp i", "fee n", "marketId s", "marketSlug s", "eventSlug s", "marketTitle s", "positionSide s",
		"outcomeIndex i", "marketLogo s", "liquidityRole s?"}
	shapeComboFill = []string{"actionType s", "comboPositionId s", "shares d", "price d", "txValue d", "actor s",
		"txHash s", "blockTimestamp i", "fee n", "legs a"}
)

var (
	decRe = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]*[1-9])?$`)
	intRe = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)
)

// checkShape asserts raw is an object with exactly the fields of shape, in
// order and of the stated types.
func checkShape(t *testing.T, raw []byte, shape []string) {
	t.Helper()
	var names []string
	for _, f := range shape {
		names = append(names, strings.Fields(f)[0])
	}
	if got := keys(t, raw); strings.Join(got, ",") != strings.Join(names, ",") {
		t.Fatalf("fields\n got %v\nwant %v", got, names)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, f := range shape {
		name, typ, _ := strings.Cut(f, " ")
		v := string(m[name])
		if v == "null" && strings.HasSuffix(typ, "?") {
			continue
		}
		var s string
		okType := false
		switch strings.TrimSuffix(typ, "?") {
		case "s":
			okType = json.Unmarshal(m[name], &s) == nil
		case "d":
			okType = json.Unmarshal(m[name], &s) == nil && decRe.MatchString(s)
		case "i":
			okType = intRe.MatchString(v)
		case "n":
			okType = decRe.MatchString(v)
		case "b":
			okType = v == "true" || v == "false"
		case "a":
			okType = strings.HasPrefix(v, "[")
		}
		if !okType {
			t.Errorf("field %s = %s, want type %s", name, v, typ)
		}
	}
}

func TestEnvelopeAndShapes(t *testing.T) {
	s, srv := fixed(t, Config{})
	w := s.Wallets()[0]
	trader := "/open-api/v1/trader/" + w
	limit := url.Values{"limit": {"100"}}

	// Envelope and list keys, in order (SHAPES.md "Envelopes").
	res := get(t, srv, trader+"/activity", nil)
	if got := strings.Join(keys(t, res.body), ","); got != "success,code,message,data" {
		t.Fatalf("envelope keys %s", got)
	}
	if got := strings.Join(keys(t, res.ok(t)), ","); got != "items,nextCursor" {
		t.Fatalf("list keys %s", got)
	}
	if ct := res.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}

	t.Run("activity", func(t *testing.T) {
		roles := map[string]int{}
		for _, it := range walk(t, srv, trader+"/activity", limit, 100) {
			checkShape(t, it, shapeActivity)
			kind := field[string](t, it, "actionType")
			role := string(mustField(t, it, "liquidityRole"))
			net := field[string](t, it, "netSharesTransferred")
			roles[kind+" "+role]++
			switch kind {
			case "Buy":
				if strings.HasPrefix(net, "-") || role == "null" {
					t.Errorf("buy %s", it)
				}
			case "Sell", "Redeem":
				if !strings.HasPrefix(net, "-") || (kind == "Redeem") != (role == "null") {
					t.Errorf("%s %s", kind, it)
				}
			default:
				t.Errorf("actionType %q", kind)
			}
			if field[string](t, it, "traderAddress") != w {
				t.Errorf("traderAddress of %s", it)
			}
		}
		for _, k := range []string{`Buy "MAKER"`, `Buy "TAKER"`, `Sell "MAKER"`, `Sell "TAKER"`} {
			if roles[k] == 0 {
				t.Errorf("no %s item in %v", k, roles)
			}
		}
	})
	t.Run("redeem", func(t *testing.T) {
		found := false
		for _, w := range s.Wallets() {
			for _, it := range walk(t, srv, "/open-api/v1/trader/"+w+"/activity", limit, 100) {
				if field[string](t, it, "actionType") == "Redeem" {
					found = true
					p := field[string](t, it, "price")
					if p != "100" && p != "0" {
						t.Errorf("redeem price %q", p)
					}
				}
			}
		}
		if !found {
			t.Error("no Redeem item in any wallet")
		}
	})
	t.Run("transfers", func(t *testing.T) {
		kinds := map[string]bool{}
		for _, it := range walk(t, srv, trader+"/deposits-withdrawals", limit, 100) {
			checkShape(t, it, shapeTransfer)
			kinds[field[string](t, it, "type")] = true
		}
		if !kinds["deposit"] || !kinds["withdrawal"] || len(kinds) != 2 {
			t.Errorf("types %v", kinds)
		}
	})
	t.Run("positions", func(t *testing.T) {
		for path, closed := range map[string]bool{"/positions/open": false, "/positions/closed": true} {
			items := walk(t, srv, trader+path, limit, 100)
			if len(items) == 0 {
				t.Errorf("%s: no items", path)
			}
			for _, it := range items {
				checkShape(t, it, shapePosition)
				if field[bool](t, it, "closed") != closed {
					t.Errorf("%s: %s", path, it)
				}
				if bal := field[string](t, it, "balance"); (bal == "0") != closed {
					t.Errorf("%s: balance %s", path, bal)
				}
			}
		}
	})
	t.Run("combos", func(t *testing.T) {
		items := walk(t, srv, trader+"/combo-positions/closed", limit, 100)
		if len(items) == 0 {
			t.Fatal("no combos")
		}
		for _, it := range items {
			checkShape(t, it, shapeCombo)
			legs := field[[]json.RawMessage](t, it, "legs")
			if len(legs) < 2 || len(legs) > 4 {
				t.Errorf("%d legs", len(legs))
			}
			for i, l := range legs {
				checkShape(t, l, shapeLeg)
				if field[int](t, l, "legIndex") != i || field[string](t, l, "comboPositionId") != field[string](t, it, "comboPositionId") {
					t.Errorf("leg %d: %s", i, l)
				}
			}
		}
	})
	t.Run("tx", func(t *testing.T) {
		for _, h := range []string{s.TradeTxs()[0], s.ComboTxs()[0]} {
			data := get(t, srv, "/open-api/v1/tx/"+h, nil).ok(t)
			checkShape(t, data, shapeTx)
			src := field[string](t, data, "sourceType")
			fill := shapeTradeFill
			if src == "COMBO" {
				fill = shapeComboFill
				if field[string](t, data, "marketId") != "" || field[string](t, data, "marketSlug") != "" {
					t.Errorf("COMBO with market: %s", data)
				}
			}
			for _, f := range field[[]json.RawMessage](t, data, "actions") {
				checkShape(t, f, fill)
				if src == "COMBO" {
					for _, l := range field[[]json.RawMessage](t, f, "legs") {
						checkShape(t, l, shapeLeg)
					}
				}
			}
		}
	})
	t.Run("orderbook", func(t *testing.T) {
		tok := s.Markets()[0].Tokens[0]
		kinds := map[string]bool{}
		for _, it := range get(t, srv, "/open-api/v1/orderbook/events", url.Values{"tokenId": {tok}, "limit": {"200"}}).list(t).Items {
			checkShape(t, it, shapeOrderbook)
			var m map[string]json.RawMessage
			_ = json.Unmarshal(it, &m)
			kind := field[string](t, it, "eventType")
			kinds[kind] = true
			book := kind == "book"
			for _, f := range []string{"side", "price", "sizeAfter"} {
				if (string(m[f]) == "null") != book {
					t.Errorf("%s event with %s = %s", kind, f, m[f])
				}
			}
			for _, f := range []string{"bids", "asks"} {
				if (string(m[f]) == "null") == book {
					t.Errorf("%s event with %s = %s", kind, f, m[f])
				}
			}
			if field[int64](t, it, "indexedTimestamp") <= field[int64](t, it, "timestamp") {
				t.Errorf("indexedTimestamp not after timestamp: %s", it)
			}
		}
		if !kinds["book"] || !kinds["price_change"] {
			t.Errorf("kinds %v", kinds)
		}
	})
	t.Run("wallet", func(t *testing.T) {
		for signer, wallet := range s.Signers() {
			got := get(t, srv, "/open-api/v1/trader/wallet-address/"+signer, nil).ok(t)
			if string(got) != `{"walletAddress":"`+wallet+`"}` {
				t.Errorf("signer %s: %s", signer, got)
			}
		}
	})
}

func mustField(t *testing.T, raw json.RawMessage, name string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	v, ok := m[name]
	if !ok {
		t.Fatalf("no field %s in %s", name, raw)
	}
	return v
}

// pathsOf lists one request per endpoint and a few filters, for the
// byte-for-byte comparisons.
func pathsOf(s *Sim) []string {
	w, m := s.Wallets()[3], s.Markets()[2]
	tr := "/open-api/v1/trader/" + w
	var signer string
	for sg, wa := range s.Signers() {
		if wa == w {
			signer = sg
		}
	}
	return []string{
		"/open-api/v1/orderbook/events?limit=500&marketId=" + m.ID,
		"/open-api/v1/orderbook/events?order=desc&eventType=book&tokenId=" + m.Tokens[1],
		tr + "/activity?limit=100",
		tr + "/activity?marketIds=" + m.ID,
		tr + "/deposits-withdrawals?limit=100",
		tr + "/combo-positions/closed",
		tr + "/positions/closed",
		tr + "/positions/open",
		"/open-api/v1/tx/" + s.TradeTxs()[5],
		"/open-api/v1/tx/" + s.ComboTxs()[2],
		"/open-api/v1/trader/wallet-address/" + signer,
	}
}

func TestDeterminism(t *testing.T) {
	a, srvA := fixed(t, Config{Seed: 42})
	_, srvB := fixed(t, Config{Seed: 42})
	_, srvC := fixed(t, Config{Seed: 43})
	same := 0
	for _, p := range pathsOf(a) {
		ra := get(t, srvA, p, nil)
		rb := get(t, srvB, p, nil)
		ra.ok(t)
		if !bytes.Equal(ra.body, rb.body) {
			t.Errorf("%s differs between two sims of one seed", p)
		}
		if bytes.Equal(ra.body, get(t, srvC, p, nil).body) {
			same++
		}
	}
	if same > 0 {
		t.Errorf("%d answers equal across seeds 42 and 43", same)
	}
	if New(Config{End: testEnd}).Wallets()[0] != New(Config{Seed: 1, End: testEnd}).Wallets()[0] {
		t.Error("seed 0 is not seed 1")
	}
}

func TestGzip(t *testing.T) {
	s, srv := fixed(t, Config{})
	path := srv.URL + pathsOf(s)[2]
	plain := do(t, srv, http.MethodGet, path, http.Header{"Accept-Encoding": {"identity"}})
	if plain.header.Get("Content-Encoding") != "" {
		t.Fatal("gzipped without asking")
	}

	req, _ := http.NewRequest(http.MethodGet, path, nil)
	req.Header.Set("Accept-Encoding", "gzip") // set by hand: the transport then leaves the body compressed
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "gzip" || resp.Header.Get("Vary") != "Accept-Encoding" ||
		resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("headers %v", resp.Header)
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(body, plain.body) {
		t.Fatal("gzipped body differs from the plain one")
	}
}
