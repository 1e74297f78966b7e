package normalize

// This file reads the list shapes: data = {"items":[...],"nextCursor":...}
// (docs/CONTRACT.md "Response envelopes", rule 2, and "Pagination"), rewriting them
// or passing them through (order book data, SHAPES.md 1, and variant A
// data). Both read Meta by the same rules.

// list reads list data at src[at] ('{'), with depths as in values.go: the
// envelope is 1, data 2, items 3, an item 4. With write it rewrites each
// item by the shape's fields; without, it only validates (the caller
// copies the bytes).
func (r *rewriter) list(at int, write bool) (int, error) {
	s := &r.scan
	b := s.src
	fields := itemFields(r.opt.Shape)
	hasItems := false
	if write {
		r.out = append(r.out, '{')
	}
	end, err := s.members(at, 2, func(name []byte, nameAt, at int) (int, error) {
		if write {
			r.key(nameAt, at)
		}
		switch string(name) {
		case "items":
			hasItems = true
			if at < len(b) && b[at] != '[' {
				return at, invalidf("items is a JSON %s, not an array", kindOf(b[at]))
			}
			if !write {
				return s.elements(at, 3, r.inspectItem)
			}
			var end int
			var err error
			r.meta.Items, end, err = r.objects(at, 3, fields, true, "items")
			return end, err
		case "nextCursor":
			v, end, err := r.scanString(at, "nextCursor", true)
			r.meta.NextCursor = v != nil
			if write && err == nil {
				r.out = append(r.out, b[at:end]...)
			}
			return end, err
		}
		if write {
			return r.keep(at, 2)
		}
		return s.value(at, 2)
	})
	if err != nil {
		return end, err
	}
	if write {
		r.out = append(r.out, '}')
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

// inspectItem validates the passed-through item at src[at] and reads its
// TimeField.
func (r *rewriter) inspectItem(at int) (int, error) {
	s := &r.scan
	b := s.src
	if at < len(b) && b[at] != '{' {
		return at, invalidf("items element %d is a JSON %s, not an object", r.meta.Items, kindOf(b[at]))
	}
	r.meta.Items++
	if r.opt.TimeField == "" {
		return s.value(at, 3)
	}
	var t int64
	hasTime := false
	end, err := s.members(at, 4, func(name []byte, _, at int) (int, error) {
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
