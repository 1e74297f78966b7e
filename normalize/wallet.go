package normalize

// wallet reads wallet mapping data at src[at] ('{'), an object whose
// walletAddress is a string or null (docs/CONTRACT.md "Routes", SHAPES.md 8),
// rewriting it with write or only validating it (variant A data).
func (r *rewriter) wallet(at int, write bool) (int, error) {
	s := &r.scan
	hasAddress := false
	if write {
		r.out = append(r.out, '{')
	}
	end, err := s.members(at, 2, func(name []byte, nameAt, at int) (int, error) {
		if string(name) != "walletAddress" {
			if !write {
				return s.value(at, 2)
			}
			r.key(nameAt, at)
			return r.keep(at, 2)
		}
		hasAddress = true
		v, end, err := r.scanString(at, "walletAddress", true)
		r.meta.DataNull = v == nil
		if write && err == nil {
			r.key(nameAt, at)
			r.out = append(r.out, s.src[at:end]...)
		}
		return end, err
	})
	if err != nil {
		return end, err
	}
	if write {
		r.out = append(r.out, '}')
	}
	if !hasAddress {
		return at, invalidf("wallet data has no walletAddress")
	}
	return end, nil
}
