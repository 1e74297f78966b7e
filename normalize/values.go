package normalize

import (
	"bytes"
	"fmt"
	"math"

	"github.com/go-json-experiment/json/jsontext"
)

// This file holds the token-level walk shared by the shapes: objects whose
// members are classified by a fieldFunc (fields.go), arrays of such objects,
// and the values of decimal and price fields. The decoder validates as it
// reads (RFC 7493: valid UTF-8, no duplicate names); the walk writes compact
// JSON straight into r.out, so a valid input always yields a valid output.

// peek returns the kind of the next token; a decoding error (invalid or
// truncated JSON) is reported as ErrInvalid.
func peek(d *jsontext.Decoder) (jsontext.Kind, error) {
	k := d.PeekKind()
	if k == 0 {
		_, err := d.ReadToken() // returns the error PeekKind kept
		if err == nil {
			return 0, invalidf("unreadable token")
		}
		return 0, syntaxErr(err)
	}
	return k, nil
}

// delim reads the delimiter a peek has just announced.
func delim(d *jsontext.Decoder) error {
	_, err := d.ReadToken()
	return syntaxErr(err)
}

// readName reads an object member name: raw is the JSON string as written,
// name its text (unescaped only when it has escapes).
func (r *rewriter) readName(d *jsontext.Decoder) (raw jsontext.Value, name []byte, err error) {
	raw, err = d.ReadValue()
	if err != nil {
		return nil, nil, syntaxErr(err)
	}
	return raw, r.textOf(raw), nil
}

// textOf returns the text of the valid JSON string raw. It aliases raw when
// raw has no escapes, r.text otherwise (valid until the next textOf).
func (r *rewriter) textOf(raw []byte) []byte {
	if len(raw) < 2 || raw[0] != '"' {
		return nil
	}
	s := raw[1 : len(raw)-1]
	if bytes.IndexByte(s, '\\') < 0 {
		return s
	}
	r.text, _ = jsontext.AppendUnquote(r.text[:0], raw)
	return r.text
}

// readString reads a value that must be a JSON string, or null if nullable.
func readString(d *jsontext.Decoder, what string, nullable bool) (jsontext.Value, error) {
	v, err := d.ReadValue()
	if err != nil {
		return nil, syntaxErr(err)
	}
	if k := v.Kind(); k != '"' && (k != 'n' || !nullable) {
		return nil, invalidf("%s is a JSON %v, not a string", what, k)
	}
	return v, nil
}

// fieldKind says how a member value is rewritten (SHAPES.md "Per endpoint").
type fieldKind uint8

const (
	keep  fieldKind = iota // copied, compacted
	dec                    // decimal: a JSON number becomes a string of the same digits
	price                  // decimal, shifted from cents when ShiftCents
	legs                   // array (or null) of combo legs
)

// field is the rewrite of one member.
type field struct {
	kind   fieldKind
	rename string // the variant A name, when it differs from variant B's
	// slot, when nonzero, is shared by the B and A names of one renamed
	// field. Should an object carry both, the first one in the input is
	// kept and the other dropped, so the output never repeats a name.
	slot uint8
}

// fieldFunc classifies the members of one kind of object by name.
type fieldFunc func(name []byte) field

// object rewrites the object at the decoder's position (its '{' peeked).
// timed marks a list item, whose TimeField feeds Meta.
func (r *rewriter) object(in *input, fields fieldFunc, timed bool) error {
	d := &in.dec
	if err := delim(d); err != nil {
		return err
	}
	r.out = append(r.out, '{')
	var seen uint32 // slots written
	var t int64
	hasTime := false
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
		isTime := timed && string(name) == r.opt.TimeField
		f := fields(name)
		if f.slot != 0 {
			if seen&(1<<f.slot) != 0 {
				if _, err := d.ReadValue(); err != nil {
					return syntaxErr(err)
				}
				continue
			}
			seen |= 1 << f.slot
		}
		if n > 0 {
			r.out = append(r.out, ',')
		}
		n++
		if f.rename != "" {
			r.out = append(r.out, '"')
			r.out = append(r.out, f.rename...)
			r.out = append(r.out, '"')
		} else {
			r.out = append(r.out, raw...)
		}
		r.out = append(r.out, ':')
		v, err := r.fieldValue(in, f.kind)
		if err != nil {
			return err
		}
		if isTime {
			t, hasTime = parseInt(v)
		}
	}
	if err := delim(d); err != nil {
		return err
	}
	r.out = append(r.out, '}')
	if timed && r.opt.TimeField != "" {
		r.itemTime(t, hasTime)
	}
	return nil
}

// objects rewrites an array of objects (its '[' peeked) and returns its
// length. what names the array in errors.
func (r *rewriter) objects(in *input, fields fieldFunc, timed bool, what string) (int, error) {
	d := &in.dec
	if err := delim(d); err != nil {
		return 0, err
	}
	r.out = append(r.out, '[')
	n := 0
	for {
		k, err := peek(d)
		if err != nil {
			return n, err
		}
		if k == ']' {
			break
		}
		if k != '{' {
			return n, invalidf("%s element %d is a JSON %v, not an object", what, n, k)
		}
		if n > 0 {
			r.out = append(r.out, ',')
		}
		if err := r.object(in, fields, timed); err != nil {
			return n, err
		}
		n++
	}
	r.out = append(r.out, ']')
	return n, delim(d)
}

// fieldValue rewrites one member value of the given kind. It returns the
// value as read when it is a scalar (for TimeField), nil otherwise.
func (r *rewriter) fieldValue(in *input, kind fieldKind) (jsontext.Value, error) {
	d := &in.dec
	if kind == legs {
		k, err := peek(d)
		if err != nil {
			return nil, err
		}
		switch k {
		case 'n':
		case '[':
			_, err := r.objects(in, legFields, false, "legs")
			return nil, err
		default:
			return nil, invalidf("legs is a JSON %v, not an array (at %s)", k, d.StackPointer())
		}
	}
	v, err := d.ReadValue()
	if err != nil {
		return nil, syntaxErr(err)
	}
	switch kind {
	case dec:
		switch v.Kind() {
		case '0': // SHAPES.md: B may send a decimal as a JSON number
			r.out = append(r.out, '"')
			r.out = append(r.out, v...)
			r.out = append(r.out, '"')
		case '"', 'n':
			r.out = append(r.out, v...)
		default:
			return nil, invalidf("decimal is a JSON %v (at %s)", v.Kind(), d.StackPointer())
		}
	case price:
		if err := r.price(v); err != nil {
			return nil, fmt.Errorf("%w (at %s)", err, d.StackPointer())
		}
	default:
		if k := v.Kind(); k == '{' || k == '[' {
			var depth int
			r.out, depth = appendCompact(r.out, v)
			// The decoder limits nesting from where it started, inside
			// the body; the output must keep the body's limit.
			if in.depth+d.StackDepth()+depth > maxDepth {
				return nil, invalidf("JSON nested too deeply (at %s)", d.StackPointer())
			}
		} else {
			r.out = append(r.out, v...)
		}
	}
	return v, nil
}

// price writes a price field: a decimal string, shifted from cents when
// ShiftCents (SPEC.md "Conventions", price scale). null stays null; any
// other value is not a price.
func (r *rewriter) price(v jsontext.Value) error {
	switch v.Kind() {
	case 'n':
		r.out = append(r.out, v...)
		return nil
	case '0', '"':
	default:
		return invalidf("price is a JSON %v", v.Kind())
	}
	s := []byte(v)
	if v.Kind() == '"' {
		s = r.textOf(v)
	}
	if !r.opt.ShiftCents {
		if _, err := parseDecimal(s); err != nil {
			return err
		}
		if v.Kind() == '"' {
			r.out = append(r.out, v...)
			return nil
		}
	}
	r.out = append(r.out, '"')
	var err error
	if r.opt.ShiftCents {
		r.out, err = ShiftCents(r.out, s)
	} else {
		r.out = append(r.out, s...)
	}
	r.out = append(r.out, '"')
	return err
}

// itemTime records one list item's TimeField for Meta.
func (r *rewriter) itemTime(t int64, ok bool) {
	switch {
	case !ok:
		r.timeMissing = true
	case !r.haveMax || t > r.meta.MaxTime:
		r.meta.MaxTime, r.haveMax = t, true
	}
}

// parseInt parses a JSON number that is an integer within int64. Timestamps
// are integers (SPEC.md "Conventions"); anything else is no time at all.
func parseInt(v []byte) (int64, bool) {
	neg := len(v) > 0 && v[0] == '-'
	if neg {
		v = v[1:]
	}
	if len(v) == 0 || len(v) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range v {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + uint64(c-'0') // 19 digits cannot overflow a uint64
	}
	switch {
	case neg && n <= math.MaxInt64+1:
		return int64(-n), true
	case !neg && n <= math.MaxInt64:
		return int64(n), true
	}
	return 0, false
}

// appendCompact appends the valid JSON value v without insignificant
// whitespace, leaving strings and numbers as written, and returns the
// nesting depth of v.
func appendCompact(dst, v []byte) ([]byte, int) {
	inString := false
	start, depth, deepest := 0, 0, 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			deepest = max(deepest, depth)
		case '}', ']':
			depth--
		case ' ', '\t', '\n', '\r':
			dst = append(dst, v[start:i]...)
			start = i + 1
		}
	}
	return append(dst, v[start:]...), deepest
}
