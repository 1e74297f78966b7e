package normalize

// This file validates data that passes through byte for byte (order book
// data, SHAPES.md 1, and variant A data) and gathers its Meta, in the same
// scanner pass that validates the envelope. Depths count the containers of
// the whole body: the envelope is 1, data 2, items 3, an item 4.

// inspect validates the data value at src[at] and returns the offset past it.
func (r *rewriter) inspect(at int) (int, error) {
	s := &r.scan
	b := s.src
	if at < len(b) && b[at] == 'n' {
		// SPEC.md rule 1: nothing found is a 200 with data null.
		r.meta.DataNull = true
		return s.literal(at, "null")
	}
	if at < len(b) && b[at] != '{' {
		return at, invalidf("data is not an object or null")
	}
	switch r.opt.Shape {
	case Transaction:
		return s.value(at, 1)
	case WalletAddress:
		return r.inspectWallet(at)
	}
	return r.inspectList(at)
}

// inspectList: SPEC.md "Response envelopes", rule 2.
func (r *rewriter) inspectList(at int) (int, error) {
	s := &r.scan
	b := s.src
	hasItems := false
	end, err := s.members(at, 2, func(name []byte, at int) (int, error) {
		switch string(name) {
		case "items":
			hasItems = true
			if at < len(b) && b[at] != '[' {
				return at, invalidf("items is not an array")
			}
			return s.elements(at, 3, r.inspectItem)
		case "nextCursor":
			v, end, err := r.scanString(at, "nextCursor", true)
			r.meta.NextCursor = v != nil
			return end, err
		}
		return s.value(at, 2)
	})
	if err != nil {
		return end, err
	}
	if !hasItems {
		return at, invalidf("list data has no items")
	}
	r.meta.HasTime = r.opt.TimeField != "" && r.meta.Items > 0 && !r.timeMissing
	if !r.meta.HasTime {
		r.meta.MaxTime = 0
	}
	return end, nil
}

// inspectItem validates the item at src[at] and reads its TimeField.
func (r *rewriter) inspectItem(at int) (int, error) {
	s := &r.scan
	b := s.src
	if at < len(b) && b[at] != '{' {
		return at, invalidf("items element %d is not an object", r.meta.Items)
	}
	r.meta.Items++
	if r.opt.TimeField == "" {
		return s.value(at, 3)
	}
	var t int64
	hasTime := false
	end, err := s.members(at, 4, func(name []byte, at int) (int, error) {
		isTime := string(name) == r.opt.TimeField
		end, err := s.value(at, 4)
		if isTime && err == nil {
			t, hasTime = parseInt(b[at:end])
		}
		return end, err
	})
	r.itemTime(t, hasTime)
	return end, err
}

// inspectWallet: SPEC.md endpoint 8, data.walletAddress string or null.
func (r *rewriter) inspectWallet(at int) (int, error) {
	s := &r.scan
	hasAddress := false
	end, err := s.members(at, 2, func(name []byte, at int) (int, error) {
		if string(name) != "walletAddress" {
			return s.value(at, 2)
		}
		hasAddress = true
		v, end, err := r.scanString(at, "walletAddress", true)
		r.meta.DataNull = v == nil
		return end, err
	})
	if err == nil && !hasAddress {
		return at, invalidf("wallet data has no walletAddress")
	}
	return end, err
}
