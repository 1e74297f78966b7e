package legacysim

import (
	"cmp"
	"slices"
	"sync"
)

// Activity kinds (docs/CONTRACT.md#shape-activity: Buy, Sell or Redeem).
const (
	actBuy uint8 = iota
	actSell
	actRedeem
)

func actionName(k uint8) string {
	switch k {
	case actBuy:
		return "Buy"
	case actSell:
		return "Sell"
	}
	return "Redeem"
}

// zeroAddress is the counterparty of deposits bridged in rather than sent
// from another wallet (docs/CONTRACT.md#params-deposits-withdrawals).
const zeroAddress = "0x0000000000000000000000000000000000000000"

// wallet is one simulated trader. All lists are newest first, the order in
// which the endpoints page them; an item's seq is its rank in the oldest
// first order, so (ts, seq) is a unique, time-independent sort key.
type wallet struct {
	addr, signer string
	acts         []activity
	transfers    []transfer
	positions    []position // generation order; seq = index
	open, closed []int      // indexes into positions, newest first
	combos       []combo

	// Encoded items are built on the first request that needs the wallet.
	encOnce sync.Once
	enc     *walletEnc

	live *liveWallet // live mode: the items past End (live.go)
}

type activity struct {
	ts                       int64 // Unix s
	seq                      uint32
	kind                     uint8
	maker                    bool
	token                    int
	price, shares, usdc, fee int64 // micro
	tx                       string
}

type transfer struct {
	ts      int64
	seq     uint32
	deposit bool
	amount  int64 // micro-USDC
	tx      string
	addr    string
}

// position totals are all micro units.
type position struct {
	token          int
	lastTs         int64
	bought, cost   int64 // shares bought, USDC paid
	sold, proceeds int64 // shares sold or redeemed, USDC received
	balance        int64
	closed         bool
}

type combo struct {
	first, last int64 // firstTradeTime, recentTradeTime (Unix s)
	seq         uint32
	id, cond    string
	tx          string
	legs        []leg
	shares      int64 // micro
	price       int64 // micro-USD per combo share
	amount, fee int64 // micro-USDC paid, fee paid
	exit        int64 // micro-USD per share received at close (1 USD won, 0 lost)
}

type leg struct {
	token int
	price int64 // micro-USD paid for this leg
}

// blockOf derives a block height from a timestamp: 2-second blocks, as on
// the venue's chain, anchored so that heights look realistic. It is what
// the activity filters fromBlock/toBlock compare against
// (docs/CONTRACT.md#params-activity).
func blockOf(ts int64) int64 {
	const anchorTs, anchorBlock = 1_700_000_000, 50_000_000
	d := ts - anchorTs
	if d < 0 && d%2 != 0 {
		d--
	}
	return max(1, anchorBlock+d/2)
}

// genWallet builds wallet wi from its own stream. It makes 4 to 6
// positions on distinct markets, 120 to 200 trades spread over them (so a
// wallet always has more than one page at the activity cap of 100), a
// Redeem for what is left on resolved markets, 30 to 50 transfers and 3
// to 6 closed combos.
func (s *Sim) genWallet(w *wallet, wi int) {
	r := newPRNG(s.seed, streamWallet, uint64(wi))
	w.addr, w.signer = r.hexID(20), r.hexID(20)
	nm := len(s.markets)

	np := min(nm, 4+r.IntN(3))
	picks := r.Perm(nm)[:np]
	counts := make([]int, np)
	for i := range counts {
		counts[i] = 3
	}
	for range 120 + r.IntN(81) - 3*np {
		counts[r.IntN(np)]++
	}
	for p, mi := range picks {
		pos, acts := s.genPosition(r, mi, counts[p])
		w.positions = append(w.positions, pos)
		w.acts = append(w.acts, acts...)
	}
	// Oldest first for seq; the stable sort keeps each position's own
	// order for trades in the same second.
	slices.SortStableFunc(w.acts, func(a, b activity) int { return cmp.Compare(a.ts, b.ts) })
	for i := range w.acts {
		w.acts[i].seq = uint32(i)
	}
	slices.Reverse(w.acts)

	for i := range w.positions {
		if w.positions[i].closed {
			w.closed = append(w.closed, i)
		} else {
			w.open = append(w.open, i)
		}
	}
	newest := func(a, b int) int {
		if c := cmp.Compare(w.positions[b].lastTs, w.positions[a].lastTs); c != 0 {
			return c
		}
		return cmp.Compare(b, a)
	}
	slices.SortFunc(w.open, newest)
	slices.SortFunc(w.closed, newest)

	w.transfers = s.genTransfers(r)
	if nm >= 2 {
		w.combos = s.genCombos(r)
	}
}

// genPosition makes n trades of one wallet in one outcome of market mi and
// the position they leave. Prices wander around the token's base price in
// tenths of a cent (the legacy host prints "78.5", "5", "100"); sells take
// 10% to 60% of the balance; one unresolved position in three is sold out
// by its last trade; resolved markets end in a Redeem of what is left, at
// 100 cents for the winner and 0 for the loser.
func (s *Sim) genPosition(r prng, mi, n int) (position, []activity) {
	m := &s.markets[mi]
	out := r.IntN(2)
	tok := m.tokens[out]
	hi := s.endS
	if m.resolved {
		hi = m.resolveTs - 1
	}
	times := make([]int64, n)
	for i := range times {
		times[i] = r.between(s.startS, hi)
	}
	slices.Sort(times)
	soldOut := !m.resolved && r.IntN(3) == 0
	base := s.basePrice(tok) / tenthCnt

	p := position{token: tok}
	acts := make([]activity, 0, n+1)
	var bal int64 // hundredths of a share
	for k, ts := range times {
		tc := min(990, max(10, base+r.between(-80, 80)))
		a := activity{ts: ts, kind: actBuy, maker: r.IntN(2) == 0, token: tok, price: tc * tenthCnt, tx: r.hexID(32)}
		var sh int64
		switch {
		case soldOut && k == n-1:
			a.kind, sh = actSell, bal
		case k > 0 && bal >= 2 && r.IntN(10) < 3:
			a.kind = actSell
			sh = min(bal-1, max(1, bal*r.between(10, 60)/100))
		default:
			sh = r.between(100, 50000)
			if r.IntN(2) == 0 {
				sh = max(100, sh-sh%100)
			}
		}
		a.shares = sh * 10_000
		a.usdc = sh * tc * 10 // hundredths of a share times tenths of a cent
		if !a.maker {
			a.fee = a.usdc * m.feeBps / 10_000
		}
		if a.kind == actBuy {
			bal += sh
			p.bought += a.shares
			p.cost += a.usdc
		} else {
			bal -= sh
			p.sold += a.shares
			p.proceeds += a.usdc
		}
		acts = append(acts, a)
	}
	p.lastTs = times[n-1]
	if m.resolved && bal > 0 {
		price := int64(0)
		if out == m.winner {
			price = micro
		}
		a := activity{ts: r.between(m.resolveTs, s.endS), kind: actRedeem, token: tok, price: price,
			shares: bal * 10_000, tx: r.hexID(32)}
		a.usdc = a.shares * price / micro
		p.sold += a.shares
		p.proceeds += a.usdc
		p.lastTs = a.ts
		bal = 0
		acts = append(acts, a)
	}
	p.balance = bal * 10_000
	p.closed = bal == 0
	return p, acts
}

// genTransfers makes 30 to 50 deposits and withdrawals. A third of the
// deposit senders is the zero address (bridged funds,
// docs/CONTRACT.md#params-deposits-withdrawals).
func (s *Sim) genTransfers(r prng) []transfer {
	senders := []string{zeroAddress, r.hexID(20), r.hexID(20)}
	dests := []string{r.hexID(20), r.hexID(20)}
	ts := make([]transfer, 30+r.IntN(21))
	for i := range ts {
		t := &ts[i]
		t.ts = r.between(s.startS, s.endS)
		t.deposit = r.IntN(5) < 3
		t.amount = r.between(1_000, 500_000) * centUSD
		t.tx = r.hexID(32)
		if t.deposit {
			t.addr = senders[r.IntN(len(senders))]
		} else {
			t.addr = dests[r.IntN(len(dests))]
		}
	}
	slices.SortStableFunc(ts, func(a, b transfer) int { return cmp.Compare(a.ts, b.ts) })
	for i := range ts {
		ts[i].seq = uint32(i)
	}
	slices.Reverse(ts)
	return ts
}

// genCombos makes 3 to 6 closed combos of 2 to 4 legs on distinct markets.
// A combo is bought before any of its legs resolves; it is lost when a
// resolved leg lost (closed at that resolution), won when every leg
// resolved in its favour (closed at the last resolution), and otherwise
// sold at a price near its cost.
func (s *Sim) genCombos(r prng) []combo {
	nm := len(s.markets)
	cs := make([]combo, 3+r.IntN(4))
	for i := range cs {
		c := &cs[i]
		c.id = r.digits(77)
		c.cond = r.hexID(32)
		c.tx = r.hexID(32)
		c.price = micro
		latest := s.endS - (s.endS-s.startS)/4
		lost, won := false, true
		var lostAt, wonAt int64 = s.endS, s.startS
		for _, mi := range r.Perm(nm)[:min(nm, 2+r.IntN(3))] {
			m := &s.markets[mi]
			out := r.IntN(2)
			tok := m.tokens[out]
			p := min(950, max(50, s.basePrice(tok)/tenthCnt+r.between(-50, 50))) * tenthCnt
			c.legs = append(c.legs, leg{token: tok, price: p})
			c.price = c.price * p / micro
			if !m.resolved {
				won = false
				continue
			}
			latest = min(latest, m.resolveTs-1)
			if out == m.winner {
				wonAt = max(wonAt, m.resolveTs)
			} else {
				lost = true
				lostAt = min(lostAt, m.resolveTs)
			}
		}
		c.price = max(c.price, 1)
		c.first = r.between(s.startS, max(s.startS, latest))
		c.shares = r.between(1_000, 50_000) * 10_000
		c.amount = c.shares * c.price / micro
		c.fee = c.amount / 100
		switch {
		case lost:
			c.exit, c.last = 0, lostAt
		case won:
			c.exit, c.last = micro, wonAt
		default:
			c.exit = min(micro, max(1, c.price*r.between(50, 160)/100))
			c.last = r.between(min(c.first+60, s.endS), s.endS)
		}
		c.last = max(c.last, c.first)
	}
	slices.SortStableFunc(cs, func(a, b combo) int { return cmp.Compare(a.last, b.last) })
	for i := range cs {
		cs[i].seq = uint32(i)
	}
	slices.Reverse(cs)
	return cs
}
