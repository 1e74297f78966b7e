package normalize

// This file rewrites transaction detail (SPEC.md endpoint 7, "Transaction
// detail" A and B; SHAPES.md 7). It needs two passes over the object:
// whether the transaction is a COMBO decides how marketSlug and marketId are
// written, and those may come before sourceType.

// txPlan is what the first pass learns about a transaction object.
type txPlan struct {
	combo      bool   // sourceType is "COMBO"
	hasActions bool   // the object has an actions member
	fills      []byte // COMBO: the fills array written as comboActions; nil: null
}

// transactionAt rewrites the transaction data at src[at], an object or
// null when the hash is not indexed (SPEC.md endpoint 7, rule 2), and
// returns the offset past it. The scanner validates the object and plans
// in one pass; the decoder then rewrites the object.
func (r *rewriter) transactionAt(at int) (int, error) {
	s := &r.scan
	b := s.src
	if at < len(b) && b[at] == 'n' {
		r.meta.DataNull = true
		r.out = append(r.out, "null"...)
		return s.literal(at, "null")
	}
	if at < len(b) && b[at] != '{' {
		return at, invalidf("data is not an object or null")
	}
	plan, end, err := r.txPlan(at)
	if err != nil {
		return end, err
	}
	return end, r.txRewrite(b[at:end], plan)
}

// txPlan validates the transaction object at src[at] and reads its
// top-level members. Only sourceType "COMBO" selects the combo layout; any
// other source type is rewritten as a TRADE, whose fills are read the same
// way. COMBO fills come from actions (variant B), or from comboActions when
// actions is null or absent (a body already laid out as variant A).
func (r *rewriter) txPlan(at int) (txPlan, int, error) {
	var p txPlan
	var actions, comboActions []byte
	s := &r.scan
	b := s.src
	end, err := s.members(at, 2, func(name []byte, at int) (int, error) {
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
		v := b[at:end]
		switch {
		case isSource:
			p.combo = v[0] == '"' && string(r.textOf(v)) == "COMBO"
		case isActions || isCombo:
			var fills []byte
			switch v[0] {
			case '[':
				fills = v
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
		if p.fills == nil {
			p.fills = comboActions
		}
	}
	return p, end, err
}

// txRewrite writes the transaction in variant A: profileAddress renamed
// traderAddress in place, fills rewritten (fillFields); TRADE keeps its fills
// in actions and ends with "comboActions":null; COMBO nulls marketSlug,
// marketId and actions in place and ends with the fills as comboActions
// (SPEC.md "Transaction detail (variant A)", rules 1 and 2).
func (r *rewriter) txRewrite(obj []byte, p txPlan) error {
	a := &r.aux
	a.reset(obj, 1)
	d := &a.dec
	if err := delim(d); err != nil {
		return err
	}
	r.out = append(r.out, '{')
	hasTrader := false
	n := 0
	for {
		k, err := peek(d)
		if err != nil {
			return err
		}
		if k == '}' {
			break
		}
		raw, name, err := r.readName(d)
		if err != nil {
			return err
		}
		member := string(name)
		drop := false
		switch member {
		case "comboActions":
			drop = true // always written last, from the plan
		case "profileAddress", "traderAddress":
			drop, hasTrader = hasTrader, true // the first of the two wins
		}
		if drop {
			if _, err := d.ReadValue(); err != nil {
				return syntaxErr(err)
			}
			continue
		}
		if n > 0 {
			r.out = append(r.out, ',')
		}
		n++
		switch member {
		case "profileAddress", "traderAddress":
			r.out = append(r.out, `"traderAddress":`...)
			_, err = r.fieldValue(a, keep)
		case "marketSlug", "marketId", "actions":
			r.out = append(r.out, raw...)
			r.out = append(r.out, ':')
			switch {
			case p.combo:
				r.out = append(r.out, "null"...)
				_, err = d.ReadValue()
				err = syntaxErr(err)
			case member == "actions":
				err = r.fills(a)
			default:
				_, err = r.fieldValue(a, keep)
			}
		default:
			r.out = append(r.out, raw...)
			r.out = append(r.out, ':')
			_, err = r.fieldValue(a, keep)
		}
		if err != nil {
			return err
		}
	}
	if err := delim(d); err != nil {
		return err
	}
	if !p.hasActions {
		if n > 0 {
			r.out = append(r.out, ',')
		}
		r.out = append(r.out, `"actions":null`...)
	}
	r.out = append(r.out, `,"comboActions":`...)
	if p.fills == nil {
		r.out = append(r.out, "null"...)
	} else {
		a.reset(p.fills, 2)
		if err := r.fills(a); err != nil {
			return err
		}
	}
	r.out = append(r.out, '}')
	return nil
}

// fills rewrites an array of fills, or null.
func (r *rewriter) fills(in *input) error {
	d := &in.dec
	k, err := peek(d)
	if err != nil {
		return err
	}
	switch k {
	case 'n':
		r.out = append(r.out, "null"...)
		_, err := d.ReadValue()
		return syntaxErr(err)
	case '[':
		_, err := r.objects(in, fillFields, false, "fills")
		return err
	}
	return invalidf("fills are a JSON %v, not an array", k)
}
