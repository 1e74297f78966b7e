package legacysim

import (
	"sync"
	"sync/atomic"
	"time"
)

// Live mode (Config.Live): the data does not stop at End. As the sim's
// clock passes End, each token's order book gets new price changes (and a
// snapshot every 10 minutes, on the grid of the generated ones), and each
// wallet new trades in its activity and new deposits and withdrawals.
//
// What holds, and why it holds:
//
//   - The data at an instant does not depend on when, or how often, the
//     sim was asked before. Each token and each wallet list draws from
//     its own stream (prng.go) one item after the other, whatever the
//     requests in between: a sim asked every second and one asked once an
//     hour later answer the same bytes for the same request at the same
//     instant.
//   - Items are only ever appended, with times after every earlier item's,
//     and an item is visible once the clock reaches its time, as the
//     generated data always was. A page of the past (every item on it
//     older than now, bounded by its cursor or an upper bound and full)
//     therefore answers the same bytes every time, and a cursor keeps
//     naming the same position: it holds the item's time and sequence
//     (cursor.go), never an offset.
//   - An ascending order book client that pages forward, taking the last
//     event's cursor when nextCursor is null, sees every new event once:
//     an event appears only when the clock reaches its time, and every
//     later event is stamped after it (TestLiveAscendingPollSeesEachEventOnce).
//
// What does not move: positions and closed combos stay as generated (a
// live trade is an activity item and a transaction, not a change to the
// position lists), and prices of the positions stay the generated ones.
//
// Generation is lazy: a token's book or a wallet's lists are extended to
// now by the first request that reads them at that instant, under a lock
// of their own; readers take an immutable view (an atomic pointer to the
// slices so far), so a reader never waits for a generator it does not
// need.

// Live sets the rates of live mode. The zero value takes every default.
type Live struct {
	BookEvery     time.Duration // mean time between two order book changes of one token; zero: 2s
	TradeEvery    time.Duration // mean time between two trades of one wallet; zero: 30s
	TransferEvery time.Duration // mean time between two deposits or withdrawals of one wallet; zero: 10m
}

// liveRates are the rates of Live in milliseconds, at least 2 each, so a
// gap drawn from [mean/2, 3*mean/2] is at least one millisecond: one
// token's events never share a millisecond, nor go back in time.
type liveRates struct {
	bookMs, tradeMs, transferMs int64
}

func newLiveRates(l *Live) *liveRates {
	ms := func(d, def time.Duration) int64 {
		if d <= 0 {
			d = def
		}
		return max(2, d.Milliseconds())
	}
	return &liveRates{
		bookMs:     ms(l.BookEvery, 2*time.Second),
		tradeMs:    ms(l.TradeEvery, 30*time.Second),
		transferMs: ms(l.TransferEvery, 10*time.Minute),
	}
}

// gap draws the time to the next item, around mean.
func gap(r prng, mean int64) int64 { return r.between(max(1, mean/2), mean+mean/2) }

// liveBook grows one token's book past End.
type liveBook struct {
	view atomic.Pointer[tokenBook] // what readers see; until says how far it goes

	mu       sync.Mutex
	r        prng
	tail     bookTail
	variety  bool
	events   []obEvent // the growing arrays; a view holds a prefix of each
	snapBuf  []byte
	snapOff  []int
	nextSlot int64 // Unix ms of the next snapshot's slot
}

// newLiveBook starts live mode of token t from its generated book b and
// the state its generator ended in.
func (s *Sim) newLiveBook(t int, b *tokenBook, tail *bookTail) *liveBook {
	startMs, endMs := s.start.UnixMilli(), s.end.UnixMilli()
	lb := &liveBook{
		r:       newPRNG(s.seed, streamLiveBook, uint64(t)),
		tail:    *tail,
		variety: s.variety,
		events:  b.events,
		snapBuf: b.snapBuf,
		snapOff: b.snapOff,
		// The generated slots are startMs + k*bookEveryMs up to End.
		nextSlot: startMs + ((endMs-startMs)/bookEveryMs+1)*bookEveryMs,
	}
	until := endMs
	if n := len(b.events); n > 0 {
		until = max(until, b.events[n-1].ts)
	}
	lb.view.Store(&tokenBook{events: b.events, snapBuf: b.snapBuf, snapOff: b.snapOff, until: until})
	return lb
}

// upTo returns a view holding every event of the token stamped at or
// before nowMs, generating what is missing.
func (lb *liveBook) upTo(s *Sim, t int, nowMs int64) *tokenBook {
	if v := lb.view.Load(); nowMs <= v.until {
		return v
	}
	lb.mu.Lock()
	defer lb.mu.Unlock()
	v := lb.view.Load()
	if nowMs <= v.until {
		return v
	}
	last := v.until
	for last <= nowMs {
		last = lb.step(s, t, last)
	}
	nv := &tokenBook{events: lb.events, snapBuf: lb.snapBuf, snapOff: lb.snapOff, until: last}
	lb.view.Store(nv)
	return nv
}

// step appends the event after the one at last (Unix ms) and returns its
// time: a snapshot when the next slot comes first, a price change
// otherwise. A snapshot is the book after every change before it, as in
// the generated data (orderbook.go), so the reconstruction rule holds on.
func (lb *liveBook) step(s *Sim, t int, last int64) int64 {
	r := lb.r
	lag := int32(r.between(50, 1500))
	next := last + gap(r, s.live.bookMs)
	if next >= lb.nextSlot {
		ts := max(last+1, lb.nextSlot+r.Int64N(1000))
		lb.nextSlot += bookEveryMs
		lb.events = append(lb.events, obEvent{ts: ts, kind: evBook, snap: int32(len(lb.snapOff) - 1), lag: lag})
		bids, asks := &lb.tail.side[sideBuy], &lb.tail.side[sideSell]
		if lb.variety {
			lb.snapBuf = appendVarietyLevels(lb.snapBuf, r, bids, asks)
		} else {
			lb.snapBuf = appendLevels(lb.snapBuf, bids, asks)
		}
		lb.snapOff = append(lb.snapOff, len(lb.snapBuf))
		return ts
	}
	sd := uint8(r.IntN(2))
	ev := obEvent{ts: next, kind: evChange, side: sd, lag: lag}
	var p int
	if lb.variety {
		p, ev.size = varietyChange(r, &lb.tail.side[sd], &lb.tail.lastRemoved[sd], func() int64 { return r.between(1, 500_000) })
		ev.spell = uint8(r.IntN(3))
		if r.IntN(4) == 0 {
			ev.spell |= spellFixed
		}
	} else {
		p, ev.size = changeLevel(r, &lb.tail.side[sd], func() int64 { return r.between(100, 500_000) })
	}
	ev.price = uint8(p)
	lb.events = append(lb.events, ev)
	return next
}

// liveWallet grows one wallet's activity and transfers past End.
type liveWallet struct {
	view atomic.Pointer[walletLive]

	mu        sync.Mutex
	rAct, rTr prng          // one stream per list: each list's items follow one another whatever the requests
	tokens    []int         // tokens it trades: its positions' on unresolved markets
	balance   map[int]int64 // shares held per token, hundredths, so that a sell never exceeds it
	acts      []activity    // oldest first; a view holds a prefix
	actsEnc   [][]byte
	trs       []transfer
	trsEnc    [][]byte
	actMs     int64 // time of the last item of each list, Unix ms
	trMs      int64
	published int // live trades registered as transactions (Sim.liveTxs)
	nActs     int // generated trades and transfers before End, the first live seq of each list
	nTrs      int
}

// walletLive is a view of a wallet's live items, oldest first: every item
// stamped at or before until (Unix s) is in it.
type walletLive struct {
	until   int64
	acts    []activity
	actsEnc [][]byte
	trs     []transfer
	trsEnc  [][]byte
}

func (s *Sim) newLiveWallet(wi int) *liveWallet {
	w := &s.wallets[wi]
	endMs := s.end.UnixMilli()
	lw := &liveWallet{
		rAct:    newPRNG(s.seed, streamLiveActivity, uint64(wi)),
		rTr:     newPRNG(s.seed, streamLiveTransfers, uint64(wi)),
		balance: make(map[int]int64),
		actMs:   endMs,
		trMs:    endMs,
		nActs:   len(w.acts),
		nTrs:    len(w.transfers),
	}
	for i := range w.positions {
		p := &w.positions[i]
		if !s.markets[s.tokens[p.token].market].resolved {
			lw.tokens = append(lw.tokens, p.token)
			lw.balance[p.token] = p.balance / 10_000
		}
	}
	if len(lw.tokens) == 0 { // every position resolved: trade the first open market
		lw.tokens = append(lw.tokens, s.markets[0].tokens[0]) // market 0 is never resolved (genMarkets)
	}
	lw.view.Store(&walletLive{until: s.endS})
	return lw
}

// upTo returns a view holding every live item of wallet wi stamped at or
// before nowS, generating what is missing.
func (lw *liveWallet) upTo(s *Sim, wi int, nowS int64) *walletLive {
	if v := lw.view.Load(); nowS <= v.until {
		return v
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if v := lw.view.Load(); nowS <= v.until {
		return v
	}
	w := &s.wallets[wi]
	// Every item of second nowS: items are stamped in ms, listed in s.
	nowMs := (nowS + 1) * 1000
	for lw.actMs < nowMs {
		lw.trade(s, w)
	}
	for lw.trMs < nowMs {
		lw.transfer(s)
	}
	// The last item of a list is the first of its second that may be
	// followed by another in the same second.
	v := &walletLive{acts: lw.acts, actsEnc: lw.actsEnc, trs: lw.trs, trsEnc: lw.trsEnc,
		until: min(lw.actMs, lw.trMs)/1000 - 1}
	lw.view.Store(v)
	// Registered after the view that holds them is published: a hash
	// found in Sim.liveTxs is in every view loaded after it.
	for ; lw.published < len(lw.acts); lw.published++ {
		s.liveTxs.Store(lw.acts[lw.published].tx, txRef{wallet: wi, idx: lw.published, live: true})
	}
	return v
}

// trade appends the wallet's next trade, as genPosition makes them: a
// price near the token's base price in tenths of a cent, a buy or, when
// it holds shares, a sell of part of them.
func (lw *liveWallet) trade(s *Sim, w *wallet) {
	r := lw.rAct
	lw.actMs += gap(r, s.live.tradeMs)
	tok := lw.tokens[r.IntN(len(lw.tokens))]
	m := &s.markets[s.tokens[tok].market]
	tc := min(990, max(10, s.basePrice(tok)/tenthCnt+r.between(-80, 80)))
	a := activity{ts: lw.actMs / 1000, seq: uint32(lw.nActs + len(lw.acts)), kind: actBuy,
		maker: r.IntN(2) == 0, token: tok, price: tc * tenthCnt, tx: r.hexID(32)}
	bal := lw.balance[tok]
	var sh int64
	if bal >= 2 && r.IntN(10) < 3 {
		a.kind = actSell
		sh = min(bal-1, max(1, bal*r.between(10, 60)/100))
		bal -= sh
	} else {
		sh = r.between(100, 50000)
		bal += sh
	}
	lw.balance[tok] = bal
	a.shares = sh * 10_000
	a.usdc = sh * tc * 10 // hundredths of a share times tenths of a cent
	if !a.maker {
		a.fee = a.usdc * m.feeBps / 10_000
	}
	lw.acts = append(lw.acts, a)
	lw.actsEnc = append(lw.actsEnc, s.appendActivity(nil, w, &a))
}

// transfer appends the wallet's next deposit or withdrawal, as
// genTransfers makes them; a third of the deposits come bridged in (the
// zero address).
func (lw *liveWallet) transfer(s *Sim) {
	r := lw.rTr
	lw.trMs += gap(r, s.live.transferMs)
	t := transfer{ts: lw.trMs / 1000, seq: uint32(lw.nTrs + len(lw.trs)), deposit: r.IntN(5) < 3,
		amount: r.between(1_000, 500_000) * centUSD, tx: r.hexID(32)}
	if t.deposit && r.IntN(3) == 0 {
		t.addr = zeroAddress
	} else {
		t.addr = r.hexID(20)
	}
	lw.trs = append(lw.trs, t)
	lw.trsEnc = append(lw.trsEnc, appendTransfer(nil, &t))
}

// newest is a wallet list newest first, as the endpoints page it: the
// live items (kept oldest first) from the newest, then the generated ones.
type newest[T any] struct {
	live    []T
	liveEnc [][]byte
	gen     []T
	genEnc  [][]byte
}

func (l *newest[T]) len() int { return len(l.live) + len(l.gen) }

func (l *newest[T]) at(i int) *T {
	if n := len(l.live); i < n {
		return &l.live[n-1-i]
	}
	return &l.gen[i-len(l.live)]
}

func (l *newest[T]) enc(i int) []byte {
	if n := len(l.live); i < n {
		return l.liveEnc[n-1-i]
	}
	return l.genEnc[i-len(l.live)]
}

// activityOf is w's activity as of nowS.
func (s *Sim) activityOf(wi int, nowS int64) newest[activity] {
	w := &s.wallets[wi]
	l := newest[activity]{gen: w.acts, genEnc: s.encoded(w).acts}
	if s.live != nil {
		v := w.live.upTo(s, wi, nowS)
		l.live, l.liveEnc = v.acts, v.actsEnc
	}
	return l
}

// transfersOf is w's deposits and withdrawals as of nowS.
func (s *Sim) transfersOf(wi int, nowS int64) newest[transfer] {
	w := &s.wallets[wi]
	l := newest[transfer]{gen: w.transfers, genEnc: s.encoded(w).transfers}
	if s.live != nil {
		v := w.live.upTo(s, wi, nowS)
		l.live, l.liveEnc = v.trs, v.trsEnc
	}
	return l
}

// liveTx finds a transaction of a live trade stamped at or before nowS.
// Every wallet is brought up to nowS first, so that the answer for a hash
// does not depend on which wallets were read before.
func (s *Sim) liveTx(hash string, nowS int64) (wi int, a *activity, ok bool) {
	for i := range s.wallets {
		s.wallets[i].live.upTo(s, i, nowS)
	}
	v, ok := s.liveTxs.Load(hash)
	if !ok {
		return 0, nil, false
	}
	ref := v.(txRef)
	a = &s.wallets[ref.wallet].live.view.Load().acts[ref.idx]
	if a.ts > nowS {
		return 0, nil, false
	}
	return ref.wallet, a, true
}
