package normalize

// This file rewrites the list shapes: data = {"items":[...],"nextCursor":...}
// (SPEC.md "Response envelopes", rule 2, and "Pagination").

// list rewrites list data, each item with fields, and fills Meta.
func (r *rewriter) list(in *input, fields fieldFunc) error {
	d := &in.dec
	k, err := peek(d)
	if err != nil {
		return err
	}
	switch k {
	case 'n':
		// SPEC.md rule 1: a lookup that finds nothing is a 200 with data
		// null, not an error; it passes as null for the policy to see.
		r.meta.DataNull = true
		r.out = append(r.out, "null"...)
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
	hasItems := false
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
		switch string(name) {
		case "items":
			hasItems = true
			if k, err = peek(d); err == nil && k != '[' {
				err = invalidf("items is a JSON %v, not an array", k)
			}
			if err == nil {
				r.meta.Items, err = r.objects(in, fields, r.opt.TimeField != "", "items")
			}
		case "nextCursor":
			var v []byte
			if v, err = readString(d, "nextCursor", true); err == nil {
				r.meta.NextCursor = v[0] == '"'
				r.out = append(r.out, v...)
			}
		default:
			_, err = r.fieldValue(in, keep)
		}
		if err != nil {
			return err
		}
	}
	if err := delim(d); err != nil {
		return err
	}
	r.out = append(r.out, '}')
	if !hasItems {
		return invalidf("list data has no items")
	}
	r.meta.HasTime = r.opt.TimeField != "" && r.meta.Items > 0 && !r.timeMissing
	if !r.meta.HasTime {
		r.meta.MaxTime = 0
	}
	return nil
}
