package proxy_test

import (
	"bytes"
	"encoding/json"
	"math/big"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"tradergate/proxy/config"
	"tradergate/proxy/upstream"
)

// An oracle for the B -> A rewrite, written from normalize/SHAPES.md and
// docs/CONTRACT.md independently of normalize/: every endpoint is fetched through the
// edge and, with the same canonical query, straight from legacysim, and the
// two are compared field by field.

// fieldRules are the per-object rules of one item kind.
type fieldRules struct {
	price   []string          // cents in B, 0..1 in A (a string)
	decimal []string          // strings in A, whatever B sent
	rename  map[string]string // B name -> A name
	nested  map[string]string // field -> item kind of its array elements
}

var fillRename = map[string]string{"assetId": "tokenId", "shares": "size", "txValue": "usdcSize", "actor": "traderAddress", "marketLogo": "logo"}

var kinds = map[string]fieldRules{
	"activity": {price: []string{"price"}, decimal: []string{"size", "fee", "usdcSize", "netSharesTransferred"}},
	"transfer": {decimal: []string{"amount"}},
	"position": {price: []string{"avgPrice", "currentPrice", "avgExit"},
		decimal: []string{"balance", "totalInvested", "totalBought", "value", "unrealizedPnl", "realizedPnl", "totalPnl", "percentPnl"}},
	"combo": {price: []string{"avgPrice", "currentPrice"},
		decimal: []string{"amount", "realizedPnl", "totalBought", "balance", "totalFee", "unrealizedPnl", "totalPnl", "percentPnl"},
		nested:  map[string]string{"legs": "leg"}},
	"leg":       {price: []string{"outcomePrice"}},
	"tx":        {rename: map[string]string{"profileAddress": "traderAddress"}, nested: map[string]string{"actions": "fill", "comboActions": "fill"}},
	"fill":      {price: []string{"price"}, decimal: []string{"shares", "txValue", "fee"}, rename: fillRename, nested: map[string]string{"legs": "leg"}},
	"orderbook": {},
	"wallet":    {},
}

// rat parses a decimal given as a string or a JSON number, exactly.
func rat(t *testing.T, v any) *big.Rat {
	t.Helper()
	var s string
	switch v := v.(type) {
	case string:
		s = v
	case json.Number:
		s = v.String()
	default:
		t.Fatalf("decimal is %T %v", v, v)
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		t.Fatalf("not a decimal: %q", s)
	}
	return r
}

// compareItem checks one A object against its B original.
func compareItem(t *testing.T, path, kind string, b, a map[string]any, shift bool) {
	t.Helper()
	rules := kinds[kind]
	hundred := big.NewRat(100, 1)
	for bk, bv := range b {
		ak := bk
		if n, ok := rules.rename[bk]; ok {
			ak = n
		}
		if _, gone := a[bk]; gone && ak != bk {
			t.Errorf("%s: B field %q still present in A", path, bk)
		}
		av, ok := a[ak]
		if !ok {
			if !(kind == "tx" && bk == "actions") {
				t.Errorf("%s: A lacks %q (B %q)", path, ak, bk)
			}
			continue
		}
		p := path + "." + ak
		switch {
		case bv == nil:
			if av != nil {
				t.Errorf("%s: B null became %v", p, av)
			}
		case slices.Contains(rules.price, bk):
			if _, isStr := av.(string); !isStr {
				t.Errorf("%s: price %v is not a string", p, av)
				continue
			}
			want := rat(t, bv)
			if shift {
				want.Quo(want, hundred)
			}
			if rat(t, av).Cmp(want) != 0 {
				t.Errorf("%s: price %v from B %v, want %s", p, av, bv, want.FloatString(10))
			}
		case slices.Contains(rules.decimal, bk):
			if _, isStr := av.(string); !isStr {
				t.Errorf("%s: decimal %v is not a string", p, av)
			} else if rat(t, av).Cmp(rat(t, bv)) != 0 {
				t.Errorf("%s: decimal %v, B %v", p, av, bv)
			}
		case rules.nested[bk] != "":
			compareArray(t, p, rules.nested[bk], bv, av, shift)
		default:
			if !reflect.DeepEqual(av, bv) {
				t.Errorf("%s: %v, B %v", p, av, bv)
			}
		}
	}
}

func compareArray(t *testing.T, path, kind string, bv, av any, shift bool) {
	t.Helper()
	bs, ok1 := bv.([]any)
	as, ok2 := av.([]any)
	if !ok1 || !ok2 || len(as) != len(bs) {
		t.Fatalf("%s: arrays differ: %T(%d) vs %T(%d)", path, bv, len(bs), av, len(as))
	}
	for i := range bs {
		bo, _ := bs[i].(map[string]any)
		ao, _ := as[i].(map[string]any)
		compareItem(t, path+"["+strconv.Itoa(i)+"]", kind, bo, ao, shift)
	}
}

// keySeq lists every object key of a JSON document in document order.
func keySeq(t *testing.T, doc []byte) []string {
	t.Helper()
	return keysOf(decodeOrdered(t, doc))
}

// ordered is a JSON value that remembers object key order.
type ordered struct {
	keys []string
	vals []any
}

func decodeOrdered(t *testing.T, doc []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var parse func() any
	parse = func() any {
		tok, err := d.Token()
		if err != nil {
			t.Fatalf("parse: %v", err)
		}
		switch tok {
		case json.Delim('{'):
			o := &ordered{}
			for d.More() {
				k, _ := d.Token()
				o.keys = append(o.keys, k.(string))
				o.vals = append(o.vals, parse())
			}
			d.Token()
			return o
		case json.Delim('['):
			var a []any
			for d.More() {
				a = append(a, parse())
			}
			d.Token()
			return a
		}
		return tok
	}
	return parse()
}

func keysOf(v any) []string {
	var out []string
	switch v := v.(type) {
	case *ordered:
		for i, k := range v.keys {
			out = append(out, k)
			out = append(out, keysOf(v.vals[i])...)
		}
	case []any:
		for _, e := range v {
			out = append(out, keysOf(e)...)
		}
	}
	return out
}

// expectedKeys maps the key sequence of a B body to the one its A rewrite
// must have: renamed in place, the envelope replaced, comboActions added.
func expectedKeys(bkeys []string, combo, tx bool) []string {
	out := []string{"message", "status_code", "data"}
	for _, k := range bkeys[4:] { // success, code, message, data come first from legacysim
		if tx {
			if n, ok := fillRename[k]; ok {
				k = n
			}
			if k == "profileAddress" {
				k = "traderAddress"
			}
		}
		out = append(out, k)
		if tx && combo && k == "actions" {
			out = append(out, "comboActions")
		}
	}
	if tx && !combo && len(bkeys) > 4 {
		out = append(out, "comboActions")
	}
	return out
}

func TestRewriteEveryEndpoint(t *testing.T) {
	for _, scale := range []string{upstream.PriceScaleCents, upstream.PriceScaleUnit} {
		t.Run(scale, func(t *testing.T) {
			e := newEdge(t, withConfig(func(c *config.Config) { c.Upstream.PriceScale = scale }))
			shift := scale == upstream.PriceScaleCents
			w := pickWallet(t, e)
			m := e.sim.Markets()[0]
			var signer string
			for s := range e.sim.Signers() {
				signer = s
				break
			}
			tests := []struct {
				name, path, kind string
			}{
				{"orderbook", "/v1/orderbook/events?tokenId=" + url.QueryEscape(m.Tokens[0]) + "&limit=50", "orderbook"},
				{"activity", "/v1/trader/" + w + "/activity?limit=100", "activity"},
				{"transfers", "/v1/trader/" + w + "/deposits-withdrawals?limit=100", "transfer"},
				{"combo", "/v1/trader/" + w + "/combo-positions/closed?limit=100", "combo"},
				{"closed", "/v1/trader/" + w + "/positions/closed?limit=100", "position"},
				{"open", "/v1/trader/" + w + "/positions/open?limit=100", "position"},
				{"tx trade", "/v1/tx/" + e.sim.TradeTxs()[0], "tx"},
				{"tx combo", "/v1/tx/" + e.sim.ComboTxs()[0], "tx"},
				{"tx unknown", "/v1/tx/0x" + strings.Repeat("ab", 32), "tx"},
				{"wallet", "/v1/trader/wallet-address/" + signer, "wallet"},
				{"wallet unknown", "/v1/trader/wallet-address/0x" + strings.Repeat("cd", 20), "wallet"},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					resp, abody := e.get(tc.path)
					if resp.StatusCode != 200 {
						t.Fatalf("status %d: %s", resp.StatusCode, abody)
					}
					bbody := e.legacy()
					if !bytes.HasPrefix(abody, []byte(`{"message":"OK","status_code":"1","data":`)) {
						t.Fatalf("not a variant A success envelope: %.120s", abody)
					}
					var aenv, benv struct {
						Data json.RawMessage
					}
					if err := json.Unmarshal(abody, &aenv); err != nil {
						t.Fatal(err)
					}
					if err := json.Unmarshal(bbody, &benv); err != nil {
						t.Fatal(err)
					}
					checkData(t, tc.kind, benv.Data, aenv.Data, shift)
					combo := tc.name == "tx combo"
					if tc.kind == "tx" || tc.kind == "wallet" || tc.kind == "activity" {
						want := expectedKeys(keySeq(t, bbody), combo, tc.kind == "tx")
						if tc.name == "tx unknown" {
							want = []string{"message", "status_code", "data"}
						}
						if got := keySeq(t, abody); !slices.Equal(got, want) {
							t.Errorf("key order\n got %v\nwant %v", got, want)
						}
					}
				})
			}
		})
	}
}

// pickWallet returns a wallet that has items on every list endpoint.
func pickWallet(t *testing.T, e *edge) string {
	t.Helper()
	for _, w := range e.sim.Wallets() {
		ok := true
		for _, p := range []string{"activity", "deposits-withdrawals", "combo-positions/closed", "positions/closed", "positions/open"} {
			_, body := e.get("/v1/trader/" + w + "/" + p)
			var env struct {
				Data struct{ Items []json.RawMessage }
			}
			_ = json.Unmarshal(body, &env)
			ok = ok && len(env.Data.Items) > 0
		}
		if ok {
			return w
		}
	}
	t.Fatal("no wallet has items on every list endpoint")
	return ""
}

func checkData(t *testing.T, kind string, bdata, adata json.RawMessage, shift bool) {
	t.Helper()
	switch kind {
	case "orderbook":
		// Order book items do not change: data passes byte for byte.
		if !bytes.Equal(adata, bdata) {
			t.Errorf("order book data changed:\nA %.200s\nB %.200s", adata, bdata)
		}
		return
	case "wallet":
		if string(bdata) == "null" {
			if string(adata) != `{"walletAddress":null}` {
				t.Errorf("null mapping: %s", adata)
			}
			return
		}
		if !bytes.Equal(adata, bdata) {
			t.Errorf("wallet data: %s vs %s", adata, bdata)
		}
		return
	case "tx":
		if string(bdata) == "null" {
			if string(adata) != "null" {
				t.Errorf("unknown tx: data %s", adata)
			}
			return
		}
		b := decode(t, bdata).(map[string]any)
		a := decode(t, adata).(map[string]any)
		if b["sourceType"] == "COMBO" {
			// docs/CONTRACT.md "Transaction detail" rule 2: fills in comboActions,
			// actions null, top-level market fields null.
			if a["actions"] != nil || a["marketId"] != nil || a["marketSlug"] != nil {
				t.Errorf("COMBO: actions %v marketId %v marketSlug %v", a["actions"], a["marketId"], a["marketSlug"])
			}
			compareArray(t, "data.comboActions", "fill", b["actions"], a["comboActions"], shift)
			delete(b, "actions")
			delete(b, "marketId")
			delete(b, "marketSlug")
		} else if a["comboActions"] != nil {
			t.Errorf("TRADE: comboActions = %v", a["comboActions"])
		}
		compareItem(t, "data", "tx", b, a, shift)
		return
	}
	b := decode(t, bdata).(map[string]any)
	a := decode(t, adata).(map[string]any)
	if !reflect.DeepEqual(a["nextCursor"], b["nextCursor"]) {
		t.Errorf("nextCursor %v, B %v", a["nextCursor"], b["nextCursor"])
	}
	if items, _ := b["items"].([]any); len(items) == 0 {
		t.Fatalf("B page is empty; the test needs items")
	}
	compareArray(t, "data.items", kind, b["items"], a["items"], shift)
}
