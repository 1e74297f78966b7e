package legacysim

import (
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Page sizes (docs/CONTRACT.md#query-parameters). Activity defaults to 50,
// the legacy guide's value, since this is that guide's host; the endpoint
// reference says 20, and the edge must not assume they agree
// (docs/CONTRACT.md#assumptions).
const (
	obDefaultLimit   = 1000
	obMaxLimit       = 10000
	obMaxMarkets     = 20
	obMaxConditions  = 20
	obMaxTokens      = 50
	obMaxEventTypes  = 2
	actDefaultLimit  = 50
	listDefaultLimit = 20
	listMaxLimit     = 100
)

// answer routes a counted request past the fault switches. It appends the
// variant B data to dst (which holds the success envelope's prefix) or
// returns the failure to send.
func (s *Sim) answer(rt route, arg string, r *http.Request, now time.Time, dst []byte) ([]byte, *apiError) {
	switch {
	case rt == routeNone:
		return dst, &apiError{http.StatusNotFound, statusMessage(http.StatusNotFound)}
	case r.Method != http.MethodGet: // every legacy endpoint is a GET
		return dst, &apiError{http.StatusMethodNotAllowed, statusMessage(http.StatusMethodNotAllowed)}
	case !s.authorized(r):
		return dst, &apiError{http.StatusUnauthorized, statusMessage(http.StatusUnauthorized)}
	}
	q := r.URL.Query()
	switch rt {
	case routeOrderbook:
		return s.orderbookEvents(dst, q, now)
	case routeActivity:
		return s.activity(dst, arg, q, now)
	case routeTransfers:
		return s.transfers(dst, arg, q, now)
	case routeCombos:
		return s.combos(dst, arg, q, now)
	case routeClosed:
		return s.positions(dst, arg, q, now, true)
	case routeOpen:
		return s.positions(dst, arg, q, now, false)
	case routeTx:
		return s.tx(dst, arg, now)
	}
	return s.walletAddress(dst, arg)
}

// orderbookEvents is orderbook_events; the checks follow its parameter table
// and rules 1 to 3.
func (s *Sim) orderbookEvents(dst []byte, q url.Values, now time.Time) ([]byte, *apiError) {
	mids, cids, tids := listParam(q, "marketId"), listParam(q, "conditionId"), listParam(q, "tokenId")
	switch {
	case len(mids) > obMaxMarkets:
		return dst, badRequest("Too many marketId values: at most 20")
	case len(cids) > obMaxConditions:
		return dst, badRequest("Too many conditionId values: at most 20")
	case len(tids) > obMaxTokens:
		return dst, badRequest("Too many tokenId values: at most 50")
	case len(mids)+len(cids)+len(tids) == 0:
		return dst, badRequest("tokenId, marketId, or conditionId is required")
	}
	var mset, cset, tset []bool
	if len(mids) > 0 {
		mset = make([]bool, len(s.markets))
		for _, id := range mids {
			if !isDigits(id) {
				return dst, badRequest("Invalid marketId: must be a numeric market ID")
			}
			if i, ok := s.marketByID[id]; ok {
				mset[i] = true
			}
		}
	}
	if len(cids) > 0 {
		cset = make([]bool, len(s.markets))
		for _, id := range cids {
			if !isHash(id) {
				return dst, badRequest("Invalid conditionId format")
			}
			if i, ok := s.marketByCond[strings.ToLower(id)]; ok {
				cset[i] = true
			}
		}
	}
	if len(tids) > 0 {
		tset = make([]bool, len(s.tokens))
		for _, id := range tids {
			if !isDigits(id) || len(id) > 78 {
				return dst, badRequest("Invalid tokenId format")
			}
			if i, ok := s.tokenByID[id]; ok {
				tset[i] = true
			}
		}
	}

	oq := obQuery{from: math.MinInt64, to: math.MaxInt64, limit: obDefaultLimit}
	ets := listParam(q, "eventType")
	if len(ets) > obMaxEventTypes {
		return dst, badRequest("Too many eventType values: at most 2")
	}
	for _, et := range ets {
		switch et {
		case "book":
			oq.kinds |= 1 << evBook
		case "price_change":
			oq.kinds |= 1 << evChange
		default:
			return dst, badRequest("Invalid eventType: must be book or price_change")
		}
	}
	if oq.kinds == 0 {
		oq.kinds = 1<<evBook | 1<<evChange
	}
	const ms = " (Unix milliseconds)"
	if v, ok, err := intParam(q, "from", ms); err != nil {
		return dst, err
	} else if ok {
		oq.from = v
	}
	if v, ok, err := intParam(q, "to", ms); err != nil {
		return dst, err
	} else if ok {
		oq.to = v
	}
	if oq.to < oq.from {
		return dst, badRequest("Invalid time range: to must be greater than or equal to from")
	}
	switch o := strings.ToLower(q.Get("order")); o {
	case "", "asc":
	case "desc":
		oq.desc = true
	default:
		return dst, badRequest("Invalid order: must be asc or desc")
	}
	if l := q.Get("limit"); l != "" {
		v, err := strconv.Atoi(l)
		if err != nil || v < 1 || v > obMaxLimit {
			return dst, badRequest("Invalid limit: must be an integer from 1 to 10000")
		}
		oq.limit = v
	}
	c, err := cursorParam(q, curOrderbook)
	if err != nil {
		return dst, err
	}
	oq.after = c
	for t := range s.tokens {
		m := s.tokens[t].market
		if (mset == nil || mset[m]) && (cset == nil || cset[m]) && (tset == nil || tset[t]) {
			oq.tokens = append(oq.tokens, t)
		}
	}
	return s.appendOrderbookPage(dst, &oq, now.UnixMilli()), nil
}

// activity is the activity route.
func (s *Sim) activity(dst []byte, addr string, q url.Values, now time.Time) ([]byte, *apiError) {
	if !isAddress(addr) {
		return dst, badRequest("Invalid address format")
	}
	mset, err := s.marketIDsParam(q)
	if err != nil {
		return dst, err
	}
	txh := strings.ToLower(q.Get("txHash"))
	if txh != "" && !isHash(txh) {
		return dst, badRequest("Invalid txHash format")
	}
	bLo, bHi, err := timeRange(q, "fromBlock", "toBlock", "")
	if err != nil {
		return dst, err
	}
	tLo, tHi, err := timeRange(q, "fromTimestamp", "toTimestamp", " (Unix seconds)")
	if err != nil {
		return dst, err
	}
	limit, err := pageLimit(q, actDefaultLimit, listMaxLimit, true)
	if err != nil {
		return dst, err
	}
	after, err := cursorParam(q, curActivity)
	if err != nil {
		return dst, err
	}
	wi, ok := s.walletIndex(addr)
	if !ok {
		return appendEmptyList(dst), nil
	}
	acts := s.activityOf(wi, now.Unix())
	match := func(i int) bool {
		a := acts.at(i)
		if mset != nil && !mset[s.tokens[a.token].market] || txh != "" && a.tx != txh ||
			a.ts < tLo || a.ts > tHi {
			return false
		}
		b := blockOf(a.ts)
		return b >= bLo && b <= bHi
	}
	key := func(i int) (int64, uint32) { a := acts.at(i); return a.ts, a.seq }
	page, more := pageList(acts.len(), key, now.Unix(), after, limit, match)
	return appendListPage(dst, acts.enc, page, more, curActivity, key), nil
}

// transfers is deposits_withdrawals. The legacy contract leaves its filter
// names unstated (docs/CONTRACT.md#assumptions); the host takes type,
// fromTimestamp, toTimestamp and minAmount (deposits only, withdrawals
// always pass), newest first.
func (s *Sim) transfers(dst []byte, addr string, q url.Values, now time.Time) ([]byte, *apiError) {
	if !isAddress(addr) {
		return dst, badRequest("Invalid address format")
	}
	wantDep, wantWd := true, true
	switch typ := strings.ToLower(q.Get("type")); typ {
	case "":
	case "deposit":
		wantWd = false
	case "withdrawal":
		wantDep = false
	default:
		return dst, badRequest("Invalid type: must be deposit or withdrawal")
	}
	tLo, tHi, err := timeRange(q, "fromTimestamp", "toTimestamp", " (Unix seconds)")
	if err != nil {
		return dst, err
	}
	minAmt, hasMin, err := decimalMicroParam(q, "minAmount")
	if err != nil {
		return dst, err
	}
	limit, err := pageLimit(q, listDefaultLimit, listMaxLimit, false)
	if err != nil {
		return dst, err
	}
	after, err := cursorParam(q, curTransfers)
	if err != nil {
		return dst, err
	}
	wi, ok := s.walletIndex(addr)
	if !ok {
		return appendEmptyList(dst), nil
	}
	ts := s.transfersOf(wi, now.Unix())
	match := func(i int) bool {
		t := ts.at(i)
		if t.ts < tLo || t.ts > tHi {
			return false
		}
		if t.deposit {
			return wantDep && (!hasMin || t.amount >= minAmt)
		}
		return wantWd
	}
	key := func(i int) (int64, uint32) { t := ts.at(i); return t.ts, t.seq }
	page, more := pageList(ts.len(), key, now.Unix(), after, limit, match)
	return appendListPage(dst, ts.enc, page, more, curTransfers, key), nil
}

// combos is combo_positions_closed; marketIds matches a combo when any leg
// is on one of the markets. A combo is listed once its close time has passed.
func (s *Sim) combos(dst []byte, addr string, q url.Values, now time.Time) ([]byte, *apiError) {
	if !isAddress(addr) {
		return dst, badRequest("Invalid address format")
	}
	mset, err := s.marketIDsParam(q)
	if err != nil {
		return dst, err
	}
	limit, err := pageLimit(q, listDefaultLimit, listMaxLimit, false)
	if err != nil {
		return dst, err
	}
	after, err := cursorParam(q, curCombos)
	if err != nil {
		return dst, err
	}
	w := s.walletOf(addr)
	if w == nil {
		return appendEmptyList(dst), nil
	}
	cs := w.combos
	match := func(i int) bool {
		if mset == nil {
			return true
		}
		for _, l := range cs[i].legs {
			if mset[s.tokens[l.token].market] {
				return true
			}
		}
		return false
	}
	key := func(i int) (int64, uint32) { return cs[i].last, cs[i].seq }
	page, more := pageList(len(cs), key, now.Unix(), after, limit, match)
	enc := s.encoded(w).combos
	return appendListPage(dst, func(i int) []byte { return enc[i] }, page, more, curCombos, key), nil
}

// positions is positions_closed and positions_open. Positions are the final
// state of the generated trades and are listed once their latest trade is
// visible; positions_open takes no marketIds
// (docs/CONTRACT.md#params-positions).
func (s *Sim) positions(dst []byte, addr string, q url.Values, now time.Time, closed bool) ([]byte, *apiError) {
	if !isAddress(addr) {
		return dst, badRequest("Invalid address format")
	}
	var mset []bool
	kind := curOpen
	if closed {
		kind = curClosed
		var err *apiError
		if mset, err = s.marketIDsParam(q); err != nil {
			return dst, err
		}
	}
	limit, err := pageLimit(q, listDefaultLimit, listMaxLimit, false)
	if err != nil {
		return dst, err
	}
	after, err := cursorParam(q, kind)
	if err != nil {
		return dst, err
	}
	w := s.walletOf(addr)
	if w == nil {
		return appendEmptyList(dst), nil
	}
	list := w.open
	if closed {
		list = w.closed
	}
	match := func(i int) bool {
		return mset == nil || mset[s.tokens[w.positions[list[i]].token].market]
	}
	key := func(i int) (int64, uint32) { return w.positions[list[i]].lastTs, uint32(list[i]) }
	page, more := pageList(len(list), key, now.Unix(), after, limit, match)
	for k, i := range page {
		page[k] = list[i]
	}
	last := func(i int) (int64, uint32) { return w.positions[i].lastTs, uint32(i) }
	enc := s.encoded(w).positions
	return appendListPage(dst, func(i int) []byte { return enc[i] }, page, more, kind, last), nil
}

// tx is the tx route: a malformed hash is a 400, an unknown or not yet
// visible one is data null (docs/CONTRACT.md#path-parameters and
// #params-lookups).
func (s *Sim) tx(dst []byte, hash string, now time.Time) ([]byte, *apiError) {
	if !isHash(hash) {
		return dst, badRequest("Invalid txHash format")
	}
	ref, ok := s.txs[strings.ToLower(hash)]
	if !ok {
		if s.live != nil {
			if wi, a, ok := s.liveTx(strings.ToLower(hash), now.Unix()); ok {
				return s.appendTradeTx(dst, wi, a), nil
			}
		}
		return append(dst, "null"...), nil
	}
	if ref.combo {
		c := &s.wallets[ref.wallet].combos[ref.idx]
		if c.first > now.Unix() {
			return append(dst, "null"...), nil
		}
		return s.appendComboTx(dst, ref.wallet, c), nil
	}
	a := &s.wallets[ref.wallet].acts[ref.idx]
	if a.ts > now.Unix() {
		return append(dst, "null"...), nil
	}
	return s.appendTradeTx(dst, ref.wallet, a), nil
}

// walletAddress is wallet_address: a signer maps to its wallet, a wallet to
// itself, anything else well-formed to {"walletAddress":null}.
func (s *Sim) walletAddress(dst []byte, addr string) ([]byte, *apiError) {
	if !isAddress(addr) {
		return dst, badRequest("Invalid address format")
	}
	addr = strings.ToLower(addr)
	wi, ok := s.signerOf[addr]
	if !ok {
		wi, ok = s.walletByAddr[addr]
	}
	if !ok {
		return append(dst, `{"walletAddress":null}`...), nil
	}
	dst = append(dst, `{"walletAddress":`...)
	dst = appendStr(dst, s.wallets[wi].addr)
	return append(dst, '}'), nil
}
