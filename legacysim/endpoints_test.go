package legacysim

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// micros parses a decimal string into micro units for exact sums.
func micros(t *testing.T, s string) int64 {
	t.Helper()
	neg := strings.HasPrefix(s, "-")
	ip, fp, _ := strings.Cut(strings.TrimPrefix(s, "-"), ".")
	if len(fp) > 6 {
		t.Fatalf("%q has more than 6 decimals", s)
	}
	i, err1 := strconv.ParseInt(ip, 10, 64)
	f, err2 := strconv.ParseInt((fp + "000000")[:6], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("not a decimal: %q", s)
	}
	if neg {
		return -(i*1_000_000 + f)
	}
	return i*1_000_000 + f
}

// listCase is one list endpoint: its path suffix, the field that
// identifies an item, the field that orders it, and the item count the
// wallet holds.
type listCase struct {
	path, id, ts string
	count        func(w *wallet) int
}

var listCases = []listCase{
	{"/activity", "txHash", "blockTimestamp", func(w *wallet) int { return len(w.acts) }},
	{"/deposits-withdrawals", "txHash", "blockTimestamp", func(w *wallet) int { return len(w.transfers) }},
	{"/combo-positions/closed", "comboPositionId", "recentTradeTime", func(w *wallet) int { return len(w.combos) }},
	{"/positions/closed", "tokenId", "recentTradeTime", func(w *wallet) int { return len(w.closed) }},
	{"/positions/open", "tokenId", "recentTradeTime", func(w *wallet) int { return len(w.open) }},
}

func TestListPaging(t *testing.T) {
	s, srv := fixed(t, Config{})
	for _, lc := range listCases {
		t.Run(strings.Trim(lc.path, "/"), func(t *testing.T) {
			for wi, w := range s.Wallets()[:3] {
				path := "/open-api/v1/trader/" + w + lc.path
				want := lc.count(&s.wallets[wi])
				var ref []string
				for _, limit := range []int{min(want, 100)/20 + 1, 7, 100} {
					items := walk(t, srv, path, url.Values{"limit": {strconv.Itoa(limit)}}, limit)
					ids := make([]string, len(items))
					seen := map[string]bool{}
					for i, it := range items {
						ids[i] = field[string](t, it, lc.id)
						if seen[ids[i]] {
							t.Fatalf("limit %d: duplicate %s", limit, ids[i])
						}
						seen[ids[i]] = true
						if i > 0 && field[int64](t, it, lc.ts) > field[int64](t, items[i-1], lc.ts) {
							t.Fatalf("limit %d: not newest first at %d", limit, i)
						}
					}
					if len(ids) != want {
						t.Fatalf("limit %d: %d items, the wallet has %d", limit, len(ids), want)
					}
					if ref == nil {
						ref = ids
					} else if !slices.Equal(ids, ref) {
						t.Fatalf("limit %d pages differently from a smaller limit", limit)
					}
				}
			}
		})
	}
}

func TestPageSizes(t *testing.T) {
	s, srv := fixed(t, Config{})
	tr := "/open-api/v1/trader/" + s.Wallets()[0]
	if n := len(s.wallets[0].acts); n <= 100 {
		t.Fatalf("wallet has %d activity items, want more than 100", n)
	}
	size := func(path string, q url.Values) int { return len(get(t, srv, tr+path, q).list(t).Items) }
	// The legacy guide's activity default is 50, its endpoint reference
	// says 20 (docs/CONTRACT.md#assumptions); the edge must not assume 20.
	if n := size("/activity", nil); n != 50 {
		t.Errorf("activity default page %d, want 50", n)
	}
	for _, l := range []string{"100", "101", "1000", "99999999999", "99999999999999999999999"} {
		if n := size("/activity", url.Values{"limit": {l}}); n != 100 {
			t.Errorf("activity limit %s: %d items, want the cap 100", l, n)
		}
	}
	if n := size("/deposits-withdrawals", nil); n != 20 {
		t.Errorf("transfers default page %d, want 20", n)
	}
	if n := size("/activity", url.Values{"limit": {"1"}}); n != 1 {
		t.Errorf("limit 1: %d", n)
	}
	// Unknown wallets have empty lists.
	l := get(t, srv, "/open-api/v1/trader/0x00000000000000000000000000000000000000aa/activity", nil).list(t)
	if len(l.Items) != 0 || l.NextCursor != nil {
		t.Errorf("unknown wallet: %+v", l)
	}
}

func TestListFilters(t *testing.T) {
	s, srv := fixed(t, Config{})
	w := &s.wallets[1]
	tr := "/open-api/v1/trader/" + w.addr
	all := walk(t, srv, tr+"/activity", url.Values{"limit": {"100"}}, 100)

	count := func(items []json.RawMessage, keep func(json.RawMessage) bool) int {
		n := 0
		for _, it := range items {
			if keep(it) {
				n++
			}
		}
		return n
	}
	check := func(name string, path string, q url.Values, keep func(json.RawMessage) bool, from []json.RawMessage) {
		t.Helper()
		q.Set("limit", "100")
		got := walk(t, srv, tr+path, q, 100)
		want := count(from, keep)
		if len(got) != want || want == 0 || want == len(from) {
			t.Errorf("%s: %d items, want %d of %d (a filter that keeps some)", name, len(got), want, len(from))
		}
		for _, it := range got {
			if !keep(it) {
				t.Errorf("%s: item does not match: %s", name, it)
			}
		}
	}

	m0, m1 := s.markets[s.tokens[w.positions[0].token].market].id, s.markets[s.tokens[w.positions[1].token].market].id
	inMarkets := func(it json.RawMessage) bool {
		id := field[string](t, it, "marketId")
		return id == m0 || id == m1
	}
	check("marketIds", "/activity", url.Values{"marketIds": {m0 + "," + m1}}, inMarkets, all)

	mid := field[int64](t, all[len(all)/2], "blockTimestamp")
	check("timestamps", "/activity", url.Values{"fromTimestamp": {strconv.FormatInt(mid-3600, 10)}, "toTimestamp": {strconv.FormatInt(mid, 10)}},
		func(it json.RawMessage) bool {
			ts := field[int64](t, it, "blockTimestamp")
			return ts >= mid-3600 && ts <= mid
		}, all)
	b := blockOf(mid)
	check("blocks", "/activity", url.Values{"fromBlock": {strconv.FormatInt(b, 10)}},
		func(it json.RawMessage) bool { return blockOf(field[int64](t, it, "blockTimestamp")) >= b }, all)

	h := field[string](t, all[3], "txHash")
	got := get(t, srv, tr+"/activity", url.Values{"txHash": {strings.ToUpper(h[2:])}}).status
	if got != http.StatusBadRequest {
		t.Errorf("txHash without 0x: %d", got)
	}
	items := get(t, srv, tr+"/activity", url.Values{"txHash": {"0x" + strings.ToUpper(h[2:])}}).list(t).Items
	if len(items) != 1 || field[string](t, items[0], "txHash") != h {
		t.Errorf("txHash filter: %d items", len(items))
	}

	transfers := walk(t, srv, tr+"/deposits-withdrawals", url.Values{"limit": {"100"}}, 100)
	isType := func(typ string) func(json.RawMessage) bool {
		return func(it json.RawMessage) bool { return field[string](t, it, "type") == typ }
	}
	check("type", "/deposits-withdrawals", url.Values{"type": {"DEPOSIT"}}, isType("deposit"), transfers)
	check("type", "/deposits-withdrawals", url.Values{"type": {"Withdrawal"}}, isType("withdrawal"), transfers)
	// minAmount applies to deposits only; withdrawals always pass.
	check("minAmount", "/deposits-withdrawals", url.Values{"minAmount": {"2500.5"}}, func(it json.RawMessage) bool {
		return field[string](t, it, "type") == "withdrawal" || micros(t, field[string](t, it, "amount")) >= 2_500_500_000
	}, transfers)

	closed := walk(t, srv, tr+"/positions/closed", url.Values{"limit": {"100"}}, 100)
	cm := field[string](t, closed[0], "marketId")
	check("closed marketIds", "/positions/closed", url.Values{"marketIds": {cm}},
		func(it json.RawMessage) bool { return field[string](t, it, "marketId") == cm }, closed)

	combos := walk(t, srv, tr+"/combo-positions/closed", url.Values{"limit": {"100"}}, 100)
	legMarket := func(id string) func(json.RawMessage) bool {
		return func(it json.RawMessage) bool {
			for _, l := range field[[]json.RawMessage](t, it, "legs") {
				if field[string](t, l, "marketId") == id {
					return true
				}
			}
			return false
		}
	}
	for _, m := range s.Markets() {
		n := count(combos, legMarket(m.ID))
		if n > 0 && n < len(combos) {
			check("combo marketIds", "/combo-positions/closed", url.Values{"marketIds": {m.ID}}, legMarket(m.ID), combos)
			break
		}
	}
}

func TestTransactions(t *testing.T) {
	s, srv := fixed(t, Config{})
	w := &s.wallets[0]
	acts := walk(t, srv, "/open-api/v1/trader/"+w.addr+"/activity", url.Values{"limit": {"100"}}, 100)
	if len(acts) != len(w.acts) {
		t.Fatal("activity walk incomplete")
	}
	fills := map[int]int{}
	for _, a := range acts {
		h := field[string](t, a, "txHash")
		tx := get(t, srv, "/open-api/v1/tx/"+h, nil).ok(t)
		ts := field[int64](t, a, "blockTimestamp")
		if field[string](t, tx, "txHash") != h || field[string](t, tx, "profileAddress") != w.addr ||
			field[string](t, tx, "sourceType") != "TRADE" || field[string](t, tx, "actionType") != field[string](t, a, "actionType") ||
			field[int64](t, tx, "blockTimestamp") != ts || field[int64](t, tx, "blockNumber") != blockOf(ts) ||
			field[string](t, tx, "marketId") != field[string](t, a, "marketId") {
			t.Fatalf("tx %s does not match its activity item\n%s\n%s", h, tx, a)
		}
		actions := field[[]json.RawMessage](t, tx, "actions")
		fills[len(actions)]++
		own := actions[0]
		if field[string](t, own, "actor") != w.addr || field[string](t, own, "shares") != field[string](t, a, "size") ||
			field[string](t, own, "price") != field[string](t, a, "price") || field[string](t, own, "txValue") != field[string](t, a, "usdcSize") ||
			string(mustField(t, own, "fee")) != string(mustField(t, a, "fee")) ||
			string(mustField(t, own, "liquidityRole")) != string(mustField(t, a, "liquidityRole")) {
			t.Fatalf("first fill is not the wallet's\n%s\n%s", own, a)
		}
		checkSentence(t, tx, actions)
	}
	for n := range fills {
		if n < 1 || n > 4 {
			t.Errorf("a transaction with %d fills", n)
		}
	}
	if fills[2]+fills[3]+fills[4] == 0 {
		t.Errorf("no multi-fill transactions: %v", fills)
	}

	combos := walk(t, srv, "/open-api/v1/trader/"+w.addr+"/combo-positions/closed", url.Values{"limit": {"100"}}, 100)
	ids := map[string]bool{}
	for _, c := range combos {
		ids[field[string](t, c, "comboPositionId")] = true
	}
	for i := range w.combos {
		tx := get(t, srv, "/open-api/v1/tx/"+w.combos[i].tx, nil).ok(t)
		if field[string](t, tx, "sourceType") != "COMBO" {
			t.Fatalf("combo tx %s", tx)
		}
		actions := field[[]json.RawMessage](t, tx, "actions")
		if !ids[field[string](t, actions[0], "comboPositionId")] || field[string](t, actions[0], "actor") != w.addr {
			t.Errorf("combo fill of an unknown combo: %s", actions[0])
		}
		checkSentence(t, tx, actions)
	}
	if got := len(s.ComboTxs()); got < 3*len(s.wallets) {
		t.Errorf("%d combo txs", got)
	}

	// Unknown but well-formed: 200 with data null; case does not matter.
	if d := get(t, srv, "/open-api/v1/tx/0x"+strings.Repeat("ab", 32), nil).ok(t); string(d) != "null" {
		t.Errorf("unknown tx: %s", d)
	}
	h := s.TradeTxs()[0]
	if d := get(t, srv, "/open-api/v1/tx/0x"+strings.ToUpper(h[2:]), nil).ok(t); string(d) == "null" {
		t.Error("upper-case hash not found")
	}
}

// checkSentence asserts that the fills' txValue sum to the total the
// sentence states (the sentence is computed from the fills,
// docs/CONTRACT.md#shape-tx).
func checkSentence(t *testing.T, tx json.RawMessage, actions []json.RawMessage) {
	t.Helper()
	var sum int64
	for _, f := range actions {
		sum += micros(t, field[string](t, f, "txValue"))
	}
	sentence := field[string](t, tx, "sentence")
	_, total, ok := strings.Cut(sentence, "totaling $")
	if !ok || micros(t, total) != sum {
		t.Errorf("sentence %q, fills sum to %d micro", sentence, sum)
	}
}

func TestWalletMapping(t *testing.T) {
	s, srv := fixed(t, Config{})
	base := "/open-api/v1/trader/wallet-address/"
	if len(s.Signers()) != len(s.Wallets()) {
		t.Fatalf("%d signers for %d wallets", len(s.Signers()), len(s.Wallets()))
	}
	for signer, w := range s.Signers() {
		for _, a := range []string{signer, "0x" + strings.ToUpper(signer[2:])} {
			if d := get(t, srv, base+a, nil).ok(t); string(d) != `{"walletAddress":"`+w+`"}` {
				t.Errorf("%s: %s", a, d)
			}
		}
		if d := get(t, srv, base+w, nil).ok(t); string(d) != `{"walletAddress":"`+w+`"}` {
			t.Errorf("a wallet maps to itself; %s: %s", w, d)
		}
	}
	if d := get(t, srv, base+"0x"+strings.Repeat("0", 39)+"1", nil).ok(t); string(d) != `{"walletAddress":null}` {
		t.Errorf("unknown: %s", d)
	}
	get(t, srv, base+"0x123", nil).fail(t, 400, "Invalid address format")
}

func TestValidation(t *testing.T) {
	s, srv := fixed(t, Config{})
	tok := s.Markets()[0].Tokens[0]
	ob := "/open-api/v1/orderbook/events"
	tr := "/open-api/v1/trader/" + s.Wallets()[0]
	many := func(n int, v string) string { return strings.TrimSuffix(strings.Repeat(v+",", n), ",") }
	hash := "0x" + strings.Repeat("a", 64)
	cases := []struct {
		name, path string
		q          url.Values
		msg        string
	}{
		{"ob none", ob, url.Values{"limit": {"5"}}, "tokenId, marketId, or conditionId is required"},
		{"ob empty values", ob, url.Values{"tokenId": {","}}, "tokenId, marketId, or conditionId is required"},
		{"ob marketIds", ob, url.Values{"marketId": {many(21, "1")}}, "Too many marketId values: at most 20"},
		{"ob marketIds repeated", ob, url.Values{"marketId": {many(11, "1"), many(10, "2")}}, "Too many marketId values: at most 20"},
		{"ob conditionIds", ob, url.Values{"conditionId": {many(21, hash)}}, "Too many conditionId values: at most 20"},
		{"ob tokenIds", ob, url.Values{"tokenId": {many(51, tok)}}, "Too many tokenId values: at most 50"},
		{"ob marketId format", ob, url.Values{"marketId": {"abc"}}, "Invalid marketId: must be a numeric market ID"},
		{"ob conditionId format", ob, url.Values{"conditionId": {"0x12"}}, "Invalid conditionId format"},
		{"ob tokenId format", ob, url.Values{"tokenId": {"12x"}}, "Invalid tokenId format"},
		{"ob eventType", ob, url.Values{"tokenId": {tok}, "eventType": {"trade"}}, "Invalid eventType: must be book or price_change"},
		{"ob eventTypes", ob, url.Values{"tokenId": {tok}, "eventType": {"book,price_change,book"}}, "Too many eventType values: at most 2"},
		{"ob from", ob, url.Values{"tokenId": {tok}, "from": {"yesterday"}}, "Invalid from: must be an integer (Unix milliseconds)"},
		{"ob to", ob, url.Values{"tokenId": {tok}, "to": {"1.5"}}, "Invalid to: must be an integer (Unix milliseconds)"},
		{"ob range", ob, url.Values{"tokenId": {tok}, "from": {"10"}, "to": {"9"}}, "Invalid time range: to must be greater than or equal to from"},
		{"ob order", ob, url.Values{"tokenId": {tok}, "order": {"up"}}, "Invalid order: must be asc or desc"},
		{"ob limit 0", ob, url.Values{"tokenId": {tok}, "limit": {"0"}}, "Invalid limit: must be an integer from 1 to 10000"},
		{"ob limit high", ob, url.Values{"tokenId": {tok}, "limit": {"10001"}}, "Invalid limit: must be an integer from 1 to 10000"},
		{"ob limit text", ob, url.Values{"tokenId": {tok}, "limit": {"ten"}}, "Invalid limit: must be an integer from 1 to 10000"},
		{"ob cursor", ob, url.Values{"tokenId": {tok}, "cursor": {"bogus"}}, "Invalid cursor"},
		{"activity address", "/open-api/v1/trader/0xabc/activity", nil, "Invalid address format"},
		{"activity address chars", "/open-api/v1/trader/0x" + strings.Repeat("g", 40) + "/activity", nil, "Invalid address format"},
		{"activity limit 0", tr + "/activity", url.Values{"limit": {"0"}}, "Invalid limit: must be at least 1"},
		{"activity limit text", tr + "/activity", url.Values{"limit": {"x"}}, "Invalid limit: must be an integer"},
		{"activity txHash", tr + "/activity", url.Values{"txHash": {"0x12"}}, "Invalid txHash format"},
		{"activity fromBlock", tr + "/activity", url.Values{"fromBlock": {"1e5"}}, "Invalid fromBlock: must be an integer"},
		{"activity toTimestamp", tr + "/activity", url.Values{"toTimestamp": {"now"}}, "Invalid toTimestamp: must be an integer (Unix seconds)"},
		{"activity marketIds", tr + "/activity", url.Values{"marketIds": {"1,x"}}, "Invalid marketIds: must be comma-separated numeric market IDs"},
		{"activity cursor of another list", tr + "/activity", url.Values{"cursor": {string(appendCursor(nil, cursorPos{kind: curTransfers}))}}, "Invalid cursor"},
		{"transfers type", tr + "/deposits-withdrawals", url.Values{"type": {"bridge"}}, "Invalid type: must be deposit or withdrawal"},
		{"transfers minAmount", tr + "/deposits-withdrawals", url.Values{"minAmount": {"1,000"}}, "Invalid minAmount: must be a decimal number with at most 6 decimals"},
		{"transfers limit", tr + "/deposits-withdrawals", url.Values{"limit": {"101"}}, "Invalid limit: must be an integer from 1 to 100"},
		{"transfers address", "/open-api/v1/trader/abc/deposits-withdrawals", nil, "Invalid address format"},
		{"combos limit", tr + "/combo-positions/closed", url.Values{"limit": {"0"}}, "Invalid limit: must be an integer from 1 to 100"},
		{"combos marketIds", tr + "/combo-positions/closed", url.Values{"marketIds": {"a"}}, "Invalid marketIds: must be comma-separated numeric market IDs"},
		{"closed limit", tr + "/positions/closed", url.Values{"limit": {"500"}}, "Invalid limit: must be an integer from 1 to 100"},
		{"open cursor", tr + "/positions/open", url.Values{"cursor": {"AAAA"}}, "Invalid cursor"},
		{"open address", "/open-api/v1/trader/0x" + strings.Repeat("1", 41) + "/positions/open", nil, "Invalid address format"},
		{"tx hash", "/open-api/v1/tx/0x1234", nil, "Invalid txHash format"},
		{"tx hash no prefix", "/open-api/v1/tx/" + strings.Repeat("a", 64), nil, "Invalid txHash format"},
		{"wallet address", "/open-api/v1/trader/wallet-address/xyz", nil, "Invalid address format"},
		// The overlap of activity and wallet_address (route.go) is wallet_address.
		{"overlap", "/open-api/v1/trader/wallet-address/activity", nil, "Invalid address format"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			get(t, srv, c.path, c.q).fail(t, http.StatusBadRequest, c.msg)
		})
	}
	// Case-insensitive order and conditionId, empty values as absent,
	// unknown parameters ignored.
	m := s.Markets()[0]
	for _, q := range []url.Values{
		{"conditionId": {"0x" + strings.ToUpper(m.ConditionID[2:])}, "order": {"DESC"}, "limit": {"3"}},
		{"marketId": {m.ID}, "order": {""}, "limit": {""}, "bogus": {"1"}},
	} {
		if l := get(t, srv, ob, q).list(t); len(l.Items) == 0 {
			t.Errorf("%v: no items", q)
		}
	}
	if st := s.Stats(); st.ByRoute["wallet_address"] != 2 {
		t.Errorf("overlap path counted as %v", st.ByRoute)
	}
}

func TestAuthAndRouting(t *testing.T) {
	s, srv := fixed(t, Config{Key: "k3y"})
	path := srv.URL + "/open-api/v1/trader/" + s.Wallets()[0] + "/positions/open"
	for _, h := range []string{"", "Bearer", "Bearer wrong", "Basic k3y", "k3y"} {
		hdr := http.Header{}
		if h != "" {
			hdr.Set("Authorization", h)
		}
		do(t, srv, http.MethodGet, path, hdr).fail(t, http.StatusUnauthorized, "Missing or invalid API key")
	}
	for _, h := range []string{"Bearer k3y", "bearer k3y"} {
		do(t, srv, http.MethodGet, path, http.Header{"Authorization": {h}}).ok(t)
	}

	_, open := fixed(t, Config{})
	for _, p := range []string{"/v1/orderbook/events", "/open-api/v2/orderbook/events", "/open-api/v1/trader/" + s.Wallets()[0],
		"/open-api/v1/trader/" + s.Wallets()[0] + "/positions", "/open-api/v1/tx/", "/open-api/v1/orderbook/events/"} {
		get(t, open, p, nil).fail(t, http.StatusNotFound, "Not found")
	}
	r := do(t, open, http.MethodPost, open.URL+"/open-api/v1/tx/"+strings.Repeat("a", 64), nil)
	r.fail(t, http.StatusMethodNotAllowed, "Method not allowed")
	if r.header.Get("Allow") != http.MethodGet {
		t.Errorf("Allow %q", r.header.Get("Allow"))
	}
}

// Odd sizes still give a consistent host: every endpoint answers 200.
func TestSmallConfigs(t *testing.T) {
	for _, cfg := range []Config{
		{History: time.Second, Wallets: 1, Markets: 1},
		{History: 5 * time.Minute, Wallets: 2, Markets: 2},
		{History: 10 * 24 * time.Hour, Wallets: 3, Markets: 3, Seed: -5},
	} {
		s, srv := fixed(t, cfg)
		for _, p := range pathsOfAll(s) {
			get(t, srv, p, nil).ok(t)
		}
	}
}

// pathsOfAll is one request per endpoint that exists in any sim.
func pathsOfAll(s *Sim) []string {
	w := s.Wallets()[0]
	tr := "/open-api/v1/trader/" + w
	ps := []string{
		"/open-api/v1/orderbook/events?limit=10000&marketId=" + s.Markets()[0].ID,
		tr + "/activity", tr + "/deposits-withdrawals", tr + "/combo-positions/closed",
		tr + "/positions/closed", tr + "/positions/open",
		"/open-api/v1/tx/" + s.TradeTxs()[0],
		"/open-api/v1/trader/wallet-address/" + w,
	}
	if cs := s.ComboTxs(); len(cs) > 0 {
		ps = append(ps, "/open-api/v1/tx/"+cs[0])
	}
	return ps
}
