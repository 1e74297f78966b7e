package normalize

// This file rewrites transaction detail (docs/CONTRACT.md "Routes", "Transaction
// detail" A and B; SHAPES.md 7). It needs two passes over the object:
// whether the transaction is a COMBO decides how marketSlug and marketId are
// written, and those may come before sourceType.

// txPlan is what the first pass learns about a transaction object.
type txPlan struct {
	combo      bool // sourceType is "COMBO"
	hasActions bool // the object has an actions member
	fills      int  // COMBO: offset of the fills array written as comboActions; -1: null
}

// transaction rewrites the transaction object at src[at] ('{') and returns
// the offset past it. The first pass validates the object and plans; the
// second writes it.
func (r *rewriter) transaction(at int) (int, error) {
	plan, end, err := r.txPlan(at)
	if err != nil {
		return end, err
	}
	return end, r.txRewrite(at, plan)
}

// txPlan validates the transaction object at src[at] and reads its
// top-level members. Only sourceType "COMBO" selects the combo layout; any
// other source type is rewritten as a TRADE, whose fills are read the same
// way. COMBO fills come from actions (variant B), or from comboActions when
// actions is null or absent (a body already laid out as variant A).
func (r *rewriter) txPlan(at int) (txPlan, int, error) {
	p := txPlan{fills: -1}
	actions, comboActions := -1, -1
	s := &r.scan
	b := s.src
	end, err := s.members(at, 2, func(name []byte, _, at int) (int, error) {
		var isSource, isActions, isCombo bool
		switch string(name) {
		case "sourceType":
			isSource = true
		case "actions":
			isActions, p.hasActions = true, true
		case "comboActions":
			isCombo = true
		}
		end, err := s.value(at, 2)
		if err != nil {
			return end, err
		}
		switch {
		case isSource:
			p.combo = b[at] == '"' && string(r.textOf(b[at:end])) == "COMBO"
		case isActions || isCombo:
			fills := -1
			switch b[at] {
			case '[':
				fills = at
			case 'n':
			default:
				return at, invalidf("actions or comboActions is not an array or null")
			}
			if isActions {
				actions = fills
			} else {
				comboActions = fills
			}
		}
		return end, nil
	})
	if p.combo {
		p.fills = actions
		if p.fills < 0 {
			p.fills = comboActions
		}
	}
	return p, end, err
}

// txRewrite writes the transaction at src[at] in variant A: profileAddress
// renamed traderAddress in place, fills rewritten (fillFields); TRADE keeps
// its fills in actions and ends with "comboActions":null; COMBO nulls
// marketSlug, marketId and actions in place and ends with the fills as
// comboActions (docs/CONTRACT.md "Transaction detail (variant A)", rules 1 and 2).
func (r *rewriter) txRewrite(at int, p txPlan) error {
	s := &r.scan
	hasTrader := false
	r.out = append(r.out, '{')
	_, err := s.members(at, 2, func(name []byte, nameAt, at int) (int, error) {
		switch string(name) {
		case "comboActions":
			return s.value(at, 2) // always written last, from the plan
		case "profileAddress", "traderAddress":
			if hasTrader {
				return s.value(at, 2) // the first of the two wins
			}
			hasTrader = true
			r.out = appendKey(r.out, `"traderAddress"`)
			return r.keep(at, 2)
		case "marketSlug", "marketId", "actions":
			r.key(nameAt, at)
			switch {
			case p.combo:
				r.out = append(r.out, "null"...)
				return s.value(at, 2)
			case string(name) == "actions":
				return r.objectsOrNull(at, 2, fillFields, "fills")
			}
			return r.keep(at, 2)
		}
		r.key(nameAt, at)
		return r.keep(at, 2)
	})
	if err != nil {
		return err
	}
	if !p.hasActions {
		r.out = appendKey(r.out, `"actions"`)
		r.out = append(r.out, "null"...)
	}
	r.out = appendKey(r.out, `"comboActions"`)
	if p.fills < 0 {
		r.out = append(r.out, "null"...)
	} else if _, err := r.objectsOrNull(p.fills, 2, fillFields, "fills"); err != nil {
		return err
	}
	r.out = append(r.out, '}')
	return nil
}
