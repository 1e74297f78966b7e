package legacysim

import "strconv"

// txRef locates an indexed transaction: activity item idx of wallet w
// (sourceType TRADE), or combo idx (sourceType COMBO).
type txRef struct {
	wallet, idx int
	combo       bool
	live        bool // a live trade (live.go): idx is into its wallet's live activity
}

// fill is one actor's part of a transaction (docs/CONTRACT.md#shape-tx:
// one order may be matched against several counterparties).
type fill struct {
	kind        uint8
	actor       string
	shares, fee int64  // micro
	role        string // "MAKER", "TAKER" or "" (null)
}

// opposite is the action of the other side of a match.
func opposite(k uint8) uint8 {
	if k == actBuy {
		return actSell
	}
	return actBuy
}

// splitShares cuts total (micro, a whole number of hundredths) into n
// positive parts of whole hundredths.
func splitShares(r prng, total int64, n int) []int64 {
	h := total / 10_000
	n = int(min(int64(n), h))
	parts := make([]int64, n)
	left := h
	for i := range n - 1 {
		parts[i] = r.between(1, left-int64(n-1-i))
		left -= parts[i]
	}
	parts[n-1] = left
	for i := range parts {
		parts[i] *= 10_000
	}
	return parts
}

// tradeFills derives the fills of an activity item's transaction from its
// own stream, on lookup. The wallet's fill comes first and repeats the
// activity item. A taker is matched against 1 to 3 makers sharing its
// size; a maker shares the match with 0 to 2 other makers and one taker
// whose size is their sum. A redeem has the wallet's fill alone.
func (s *Sim) tradeFills(wi int, a *activity) []fill {
	role := "TAKER"
	if a.maker {
		role = "MAKER"
	}
	own := fill{kind: a.kind, actor: s.wallets[wi].addr, shares: a.shares, fee: a.fee}
	if a.kind == actRedeem {
		return []fill{own}
	}
	own.role = role
	r := newPRNG(s.seed, streamFills, uint64(wi)<<32|uint64(a.seq))
	bps := s.markets[s.tokens[a.token].market].feeBps
	takerFee := func(shares int64) int64 { return shares * a.price / micro * bps / 10_000 }
	fills := []fill{own}
	if !a.maker {
		for _, sh := range splitShares(r, a.shares, 1+r.IntN(3)) {
			fills = append(fills, fill{kind: opposite(a.kind), actor: r.hexID(20), shares: sh, role: "MAKER"})
		}
		return fills
	}
	total := a.shares
	for range r.IntN(3) {
		sh := r.between(1, 20_000) * 10_000
		total += sh
		fills = append(fills, fill{kind: a.kind, actor: r.hexID(20), shares: sh, role: "MAKER"})
	}
	return append(fills, fill{kind: opposite(a.kind), actor: r.hexID(20), shares: total, fee: takerFee(total), role: "TAKER"})
}

// appendTradeTx encodes SHAPES.md item 7 for sourceType TRADE.
func (s *Sim) appendTradeTx(dst []byte, wi int, a *activity) []byte {
	w := &s.wallets[wi]
	t := &s.tokens[a.token]
	m := &s.markets[t.market]
	fills := s.tradeFills(wi, a)
	verb := "redeemed"
	switch a.kind {
	case actBuy:
		verb = "bought"
	case actSell:
		verb = "sold"
	}
	sentence := appendMicro([]byte(w.addr+" "+verb+" "), a.shares)
	sentence = append(sentence, " "+outcomeName(t.outcome)+" shares in \""+m.title+"\" at "...)
	sentence = appendCents(sentence, a.price)
	sentence = appendSentenceTotal(sentence, fills, a.price)

	dst = appendTxHead(dst, a.tx, a.ts, w.addr, "TRADE", actionName(a.kind), string(sentence), m.slug, m.id)
	for i := range fills {
		f := &fills[i]
		dst = appendFillHead(dst, i, f, "assetId", t.id, a.price, a.tx, a.ts)
		dst = appendField(dst, "marketId", m.id)
		dst = appendField(dst, "marketSlug", m.slug)
		dst = appendField(dst, "eventSlug", m.eventSlug)
		dst = appendField(dst, "marketTitle", m.title)
		dst = appendField(dst, "positionSide", outcomeName(t.outcome))
		dst = appendIntField(dst, "outcomeIndex", int64(t.outcome))
		dst = appendField(dst, "marketLogo", m.logo)
		dst = appendKey(dst, "liquidityRole")
		if f.role == "" {
			dst = append(dst, "null"...)
		} else {
			dst = appendStr(dst, f.role)
		}
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}

// appendComboTx encodes SHAPES.md item 7 for sourceType COMBO: the wallet
// bought the combo from 1 or 2 sellers; marketSlug and marketId are "" in
// variant B.
func (s *Sim) appendComboTx(dst []byte, wi int, c *combo) []byte {
	w := &s.wallets[wi]
	r := newPRNG(s.seed, streamFills, uint64(wi)<<32|1<<31|uint64(c.seq))
	fills := []fill{{kind: actBuy, actor: w.addr, shares: c.shares, fee: c.fee}}
	for _, sh := range splitShares(r, c.shares, 1+r.IntN(2)) {
		fills = append(fills, fill{kind: actSell, actor: r.hexID(20), shares: sh})
	}
	sentence := appendMicro([]byte(w.addr+" purchased a "+strconv.Itoa(len(c.legs))+"-leg combo position: "), c.shares)
	sentence = append(sentence, " shares at "...)
	sentence = appendCents(sentence, c.price)
	sentence = appendSentenceTotal(sentence, fills, c.price)

	dst = appendTxHead(dst, c.tx, c.first, w.addr, "COMBO", "Buy", string(sentence), "", "")
	for i := range fills {
		dst = appendFillHead(dst, i, &fills[i], "comboPositionId", c.id, c.price, c.tx, c.first)
		dst = s.appendLegs(appendKey(dst, "legs"), c)
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}

// appendFillHead writes fill i of a transaction up to its fee, the members
// TRADE and COMBO fills share (SHAPES.md 7); idName is assetId or
// comboPositionId. The caller writes the rest and the closing brace.
func appendFillHead(dst []byte, i int, f *fill, idName, id string, price int64, tx string, ts int64) []byte {
	if i > 0 {
		dst = append(dst, ',')
	}
	dst = append(dst, `{"actionType":`...)
	dst = appendStr(dst, actionName(f.kind))
	dst = appendField(dst, idName, id)
	dst = appendQMicro(appendKey(dst, "shares"), f.shares)
	dst = appendQCents(appendKey(dst, "price"), price)
	dst = appendQMicro(appendKey(dst, "txValue"), f.txValue(price))
	dst = appendField(dst, "actor", f.actor)
	dst = appendField(dst, "txHash", tx)
	dst = appendIntField(dst, "blockTimestamp", ts)
	return appendMicro(appendKey(dst, "fee"), f.fee)
}

// txValue is the USDC value of the fill at price (micro).
func (f *fill) txValue(price int64) int64 { return f.shares * price / micro }

// appendSentenceTotal ends a sentence with the fill count and the sum of
// the fills' txValue at price: the sentence is computed from the fills
// (docs/CONTRACT.md#shape-tx).
func appendSentenceTotal(dst []byte, fills []fill, price int64) []byte {
	var sum int64
	for i := range fills {
		sum += fills[i].txValue(price)
	}
	dst = append(dst, " cents across "...)
	dst = strconv.AppendInt(dst, int64(len(fills)), 10)
	if len(fills) == 1 {
		dst = append(dst, " fill totaling $"...)
	} else {
		dst = append(dst, " fills totaling $"...)
	}
	return appendMicro(dst, sum)
}

// appendTxHead writes the top level of a variant B transaction up to the
// opening bracket of actions.
func appendTxHead(dst []byte, hash string, ts int64, profile, source, action, sentence, slug, id string) []byte {
	dst = append(dst, `{"txHash":`...)
	dst = appendStr(dst, hash)
	dst = appendIntField(dst, "blockNumber", blockOf(ts))
	dst = appendIntField(dst, "blockTimestamp", ts)
	dst = appendField(dst, "profileAddress", profile)
	dst = appendField(dst, "sourceType", source)
	dst = appendField(dst, "actionType", action)
	dst = appendField(dst, "sentence", sentence)
	dst = appendField(dst, "marketSlug", slug)
	dst = appendField(dst, "marketId", id)
	return append(appendKey(dst, "actions"), '[')
}
