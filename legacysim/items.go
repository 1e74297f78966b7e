package legacysim

// walletEnc holds a wallet's items as JSON, in SHAPES.md field order, so
// that a page is a run of appends (the sim is the upstream of load
// benchmarks).
type walletEnc struct {
	acts, transfers, positions, combos [][]byte
}

// encoded returns w's encoded items, building them on first use.
func (s *Sim) encoded(w *wallet) *walletEnc {
	w.encOnce.Do(func() {
		e := &walletEnc{}
		var buf []byte
		// One backing array per list keeps the wallet to a few allocations.
		collect := func(n int, enc func(dst []byte, i int) []byte) [][]byte {
			buf = buf[:0]
			ends := make([]int, n)
			for i := range n {
				buf = enc(buf, i)
				ends[i] = len(buf)
			}
			all := append([]byte(nil), buf...)
			out := make([][]byte, n)
			start := 0
			for i, end := range ends {
				out[i] = all[start:end:end]
				start = end
			}
			return out
		}
		e.acts = collect(len(w.acts), func(dst []byte, i int) []byte { return s.appendActivity(dst, w, &w.acts[i]) })
		e.transfers = collect(len(w.transfers), func(dst []byte, i int) []byte { return appendTransfer(dst, &w.transfers[i]) })
		e.positions = collect(len(w.positions), func(dst []byte, i int) []byte { return s.appendPosition(dst, &w.positions[i]) })
		e.combos = collect(len(w.combos), func(dst []byte, i int) []byte { return s.appendCombo(dst, &w.combos[i]) })
		w.enc = e
	})
	return w.enc
}

// appendActivity encodes SHAPES.md item 2. `fee` is a JSON number, as the
// legacy host sends it; price is in cents (docs/CONTRACT.md#conventions).
func (s *Sim) appendActivity(dst []byte, w *wallet, a *activity) []byte {
	t := &s.tokens[a.token]
	m := &s.markets[t.market]
	dst = append(dst, `{"blockTimestamp":`...)
	dst = appendInt(dst, a.ts)
	dst = appendField(dst, "actionType", actionName(a.kind))
	dst = appendQCents(appendKey(dst, "price"), a.price)
	dst = appendQMicro(appendKey(dst, "size"), a.shares)
	dst = appendMicro(appendKey(dst, "fee"), a.fee)
	dst = appendQMicro(appendKey(dst, "usdcSize"), a.usdc)
	net := a.shares
	if a.kind != actBuy {
		net = -net
	}
	dst = appendQMicro(appendKey(dst, "netSharesTransferred"), net)
	dst = appendField(dst, "txHash", a.tx)
	dst = appendField(dst, "tokenId", t.id)
	dst = appendField(dst, "marketId", m.id)
	dst = appendField(dst, "marketSlug", m.slug)
	dst = appendField(dst, "eventSlug", m.eventSlug)
	dst = appendField(dst, "conditionId", m.cond)
	dst = appendField(dst, "marketTitle", m.title)
	dst = appendField(dst, "positionSide", outcomeName(t.outcome))
	dst = appendIntField(dst, "outcomeIndex", int64(t.outcome))
	dst = appendField(dst, "logo", m.logo)
	dst = appendField(dst, "traderAddress", w.addr)
	dst = appendKey(dst, "liquidityRole")
	dst = appendRole(dst, a)
	return append(dst, '}')
}

// appendRole writes MAKER, TAKER, or null for non-trade actions
// (docs/CONTRACT.md#shape-activity).
func appendRole(dst []byte, a *activity) []byte {
	switch {
	case a.kind == actRedeem:
		return append(dst, "null"...)
	case a.maker:
		return append(dst, `"MAKER"`...)
	}
	return append(dst, `"TAKER"`...)
}

// appendTransfer encodes SHAPES.md item 3.
func appendTransfer(dst []byte, t *transfer) []byte {
	dst = append(dst, `{"txHash":`...)
	dst = appendStr(dst, t.tx)
	typ := "withdrawal"
	if t.deposit {
		typ = "deposit"
	}
	dst = appendField(dst, "type", typ)
	dst = appendQMicro(appendKey(dst, "amount"), t.amount)
	dst = appendIntField(dst, "blockTimestamp", t.ts)
	dst = appendField(dst, "address", t.addr)
	return append(dst, '}')
}

// appendPosition encodes SHAPES.md items 5 and 6. The figures follow from
// the position's trades: avgPrice is the weighted average buy price,
// avgExit the weighted average sell or redeem price, totalInvested the USDC
// paid, totalBought the shares bought, value the balance at currentPrice,
// realizedPnl what sales returned over the average cost of the shares sold,
// unrealizedPnl the value over the average cost of the balance, and
// percentPnl totalPnl over totalInvested.
func (s *Sim) appendPosition(dst []byte, p *position) []byte {
	t := &s.tokens[p.token]
	m := &s.markets[t.market]
	avg := p.cost * micro / p.bought
	exit := int64(0)
	if p.sold > 0 {
		exit = p.proceeds * micro / p.sold
	}
	cur := s.currentPrice(p.token)
	value := p.balance * cur / micro
	unreal := value - p.balance*avg/micro
	realized := p.proceeds - p.sold*avg/micro
	total := realized + unreal

	dst = m.appendPositionHead(dst)
	dst = appendBoolField(dst, "closed", p.closed)
	dst = appendField(dst, "tokenId", t.id)
	dst = appendField(dst, "positionSide", outcomeName(t.outcome))
	dst = appendIntField(dst, "outcomeIndex", int64(t.outcome))
	dst = appendQMicro(appendKey(dst, "balance"), p.balance)
	dst = appendQCents(appendKey(dst, "avgPrice"), avg)
	dst = appendQCents(appendKey(dst, "currentPrice"), cur)
	dst = appendQCents(appendKey(dst, "avgExit"), exit)
	dst = appendQMicro(appendKey(dst, "totalInvested"), p.cost)
	dst = appendQMicro(appendKey(dst, "totalBought"), p.bought)
	dst = appendQMicro(appendKey(dst, "value"), value)
	dst = appendQMicro(appendKey(dst, "unrealizedPnl"), unreal)
	dst = appendQMicro(appendKey(dst, "realizedPnl"), realized)
	dst = appendQMicro(appendKey(dst, "totalPnl"), total)
	dst = appendPercent(appendKey(dst, "percentPnl"), total, p.cost)
	dst = appendIntField(dst, "recentTradeTime", p.lastTs)
	return append(dst, '}')
}

// appendPercent writes 100*num/den with two decimals as a string, or null
// when den is zero (docs/CONTRACT.md#shape-position: percentPnl may be
// null).
func appendPercent(dst []byte, num, den int64) []byte {
	if den == 0 {
		return append(dst, "null"...)
	}
	dst = append(dst, '"')
	dst = appendDec(dst, num*10_000/den, 2)
	return append(dst, '"')
}

// appendCombo encodes SHAPES.md item 4. amount is the USDC paid and
// totalBought the combo shares bought (the legacy contract leaves both
// undefined);
// closed combos hold no balance, so unrealizedPnl is 0 and totalPnl equals
// realizedPnl, the proceeds over the amount paid.
func (s *Sim) appendCombo(dst []byte, c *combo) []byte {
	proceeds := c.shares * c.exit / micro
	realized := proceeds - c.amount
	dst = append(dst, `{"comboPositionId":`...)
	dst = appendStr(dst, c.id)
	dst = appendField(dst, "comboConditionId", c.cond)
	dst = appendQMicro(appendKey(dst, "amount"), c.amount)
	dst = appendQCents(appendKey(dst, "avgPrice"), c.price)
	dst = appendQMicro(appendKey(dst, "realizedPnl"), realized)
	dst = appendQMicro(appendKey(dst, "totalBought"), c.shares)
	dst = appendQMicro(appendKey(dst, "balance"), 0)
	dst = appendQMicro(appendKey(dst, "totalFee"), c.fee)
	dst = appendQCents(appendKey(dst, "currentPrice"), c.exit)
	dst = appendQMicro(appendKey(dst, "unrealizedPnl"), 0)
	dst = appendQMicro(appendKey(dst, "totalPnl"), realized)
	dst = appendPercent(appendKey(dst, "percentPnl"), realized, c.amount)
	dst = appendIntField(dst, "balanceTimestamp", c.last)
	dst = appendIntField(dst, "recentTradeTime", c.last)
	dst = appendIntField(dst, "firstTradeTime", c.first)
	dst = s.appendLegs(appendKey(dst, "legs"), c)
	return append(dst, '}')
}

// appendLegs encodes the Leg array shared by combo items and COMBO fills
// (SHAPES.md items 4 and 7). legPositionId is the leg's outcome token, the
// position a leg holds; outcomePrice is the outcome's price now.
func (s *Sim) appendLegs(dst []byte, c *combo) []byte {
	dst = append(dst, '[')
	for i, l := range c.legs {
		t := &s.tokens[l.token]
		m := &s.markets[t.market]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"comboPositionId":`...)
		dst = appendStr(dst, c.id)
		dst = appendIntField(dst, "legIndex", int64(i))
		dst = appendField(dst, "legPositionId", t.id)
		dst = appendField(dst, "marketId", m.id)
		dst = appendField(dst, "marketTitle", m.title)
		dst = appendField(dst, "logo", m.logo)
		dst = appendField(dst, "marketSlug", m.slug)
		dst = appendField(dst, "eventSlug", m.eventSlug)
		dst = appendIntField(dst, "outcomeIndex", int64(t.outcome))
		dst = appendField(dst, "outcome", outcomeName(t.outcome))
		dst = appendQCents(appendKey(dst, "outcomePrice"), s.currentPrice(l.token))
		dst = appendBoolField(dst, "resolved", m.resolved)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}
