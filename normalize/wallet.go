package normalize

// wallet rewrites wallet mapping data (SPEC.md endpoint 8, SHAPES.md 8): an
// object whose walletAddress is a string or null.
func (r *rewriter) wallet(in *input) error {
	d := &in.dec
	k, err := peek(d)
	if err != nil {
		return err
	}
	switch k {
	case 'n':
		// SPEC.md: data.walletAddress is null when no mapping exists, so
		// variant A never has data null here (SHAPES.md 8).
		r.meta.DataNull = true
		r.out = append(r.out, `{"walletAddress":null}`...)
		_, err := d.ReadValue()
		return syntaxErr(err)
	case '{':
	default:
		return invalidf("data is a JSON %v, not an object", k)
	}
	if err := delim(d); err != nil {
		return err
	}
	r.out = append(r.out, '{')
	hasAddress := false
	for n := 0; ; n++ {
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
		if n > 0 {
			r.out = append(r.out, ',')
		}
		r.out = append(r.out, raw...)
		r.out = append(r.out, ':')
		if string(name) == "walletAddress" {
			hasAddress = true
			v, err := readString(d, "walletAddress", true)
			if err != nil {
				return err
			}
			r.meta.DataNull = v[0] == 'n'
			r.out = append(r.out, v...)
			continue
		}
		if _, err = r.fieldValue(in, keep); err != nil {
			return err
		}
	}
	r.out = append(r.out, '}')
	if !hasAddress {
		return invalidf("wallet data has no walletAddress")
	}
	return delim(d)
}
