package normalize

import (
	"bytes"
	"fmt"
	"math"

	"github.com/go-json-experiment/json/jsontext"
)

// This file holds the walk shared by the rewritten shapes: objects whose
// members are classified by a fieldFunc (fields.go), arrays of such objects,
// and the values of decimal and price fields. The scanner validates as it
// reads (scan.go: as jsontext does, valid UTF-8, no duplicate names,
// nesting counted over the whole body); the walk writes compact JSON
// straight into r.out, so a valid input always yields a valid output.
//
// Offsets are into the body (r.scan.src). Depths are those of the body, as
// the scanner counts them: an object or array is at its own depth, and a
// member value at the depth of its object.

// fieldKind says how a member value is rewritten (SHAPES.md "Per endpoint").
type fieldKind uint8

const (
	keep  fieldKind = iota // copied, compacted
	dec                    // decimal: a JSON number becomes a plain decimal string
	price                  // decimal, shifted from cents when ShiftCents
	legs                   // array (or null) of combo legs
)

// field is the rewrite of one member.
type field struct {
	kind   fieldKind
	rename string // the variant A name, quoted, when it differs from variant B's
	// slot, when nonzero, is shared by the B and A names of one renamed
	// field. Should an object carry both, the first one in the input is
	// kept and the other dropped, so the output never repeats a name.
	slot uint8
}

// fieldFunc classifies the members of one kind of object by name.
type fieldFunc func(name []byte) field

// appendKey appends a member name (raw: quoted, as written) and its colon,
// after a comma unless the member is its object's first. The last byte
// written tells which: only the object's '{' precedes a first member, and
// no JSON value ends with '{'.
func appendKey[T ~string | ~[]byte](dst []byte, raw T) []byte {
	if dst[len(dst)-1] != '{' {
		dst = append(dst, ',')
	}
	dst = append(dst, raw...)
	return append(dst, ':')
}

// key writes the name of the member whose name and value start at
// src[nameAt] and src[at], as written (see appendKey).
func (r *rewriter) key(nameAt, at int) {
	r.out = appendKey(r.out, r.scan.rawName(nameAt, at))
}

// object rewrites the object at src[at] ('{') and returns the offset past
// it. timed marks a list item, whose TimeField feeds Meta.
//
// Most members come out as they went in: a kept name with a scalar value,
// or a decimal that is a string already. When the body is compact, as the
// legacy host sends it, such members side by side are one span of the
// body, and they are copied as one (a verbatim run) instead of a name, a
// colon and a value each: most of an activity item is one run.
func (r *rewriter) object(at, depth int, fields fieldFunc, timed bool) (int, error) {
	s := &r.scan
	timed = timed && r.opt.TimeField != ""
	var seen uint32 // slots written
	var t int64
	hasTime := false
	// The run not yet written: src[runAt:runEnd], runEnd 0 when none.
	var runAt, runEnd int
	flush := func() {
		if runEnd != 0 {
			r.out = append(r.out, s.src[runAt:runEnd]...)
			runEnd = 0
		}
	}
	r.out = append(r.out, '{')
	end, err := s.members(at, depth, func(name []byte, nameAt, at int) (int, error) {
		isTime := timed && string(name) == r.opt.TimeField
		f := fields(name)
		if f.slot != 0 {
			if seen&(1<<f.slot) != 0 {
				return s.value(at, depth) // the other name of the field came first
			}
			seen |= 1 << f.slot
		}
		if f.rename == "" && (f.kind == keep || f.kind == dec) {
			end, err := s.value(at, depth)
			if err != nil {
				return end, err
			}
			if c := s.src[at]; c == '"' || c == 'n' || f.kind == keep && c != '{' && c != '[' {
				if isTime {
					t, hasTime = parseInt(s.src[at:end])
				}
				// Written as it came (see keep and decimal). The member
				// joins the run if only a comma lies between them and
				// nothing between its name, colon and value.
				compact := s.src[at-1] == ':' && s.src[at-2] == '"'
				switch {
				case runEnd != 0 && compact && nameAt == runEnd+1 && s.src[runEnd] == ',':
					runEnd = end
				case compact:
					flush()
					if r.out[len(r.out)-1] != '{' {
						r.out = append(r.out, ',')
					}
					runAt, runEnd = nameAt, end
				default:
					flush()
					r.key(nameAt, at)
					r.out = append(r.out, s.src[at:end]...)
				}
				return end, nil
			}
			flush()
			r.key(nameAt, at)
			if err := r.written(at, end, f.kind); err != nil {
				return at, err
			}
			return end, nil
		}
		flush()
		if f.rename != "" {
			r.out = appendKey(r.out, f.rename)
		} else {
			r.key(nameAt, at)
		}
		end, err := r.fieldValue(at, depth, f.kind)
		if isTime && err == nil {
			t, hasTime = parseInt(s.src[at:end])
		}
		return end, err
	})
	if err != nil {
		return end, err
	}
	flush()
	r.out = append(r.out, '}')
	if timed {
		r.itemTime(t, hasTime)
	}
	return end, nil
}

// objects rewrites the array at src[at] ('[') whose elements must be
// objects, and returns its length and the offset past it. what names the
// array in errors.
func (r *rewriter) objects(at, depth int, fields fieldFunc, timed bool, what string) (n, end int, err error) {
	b := r.scan.src
	r.out = append(r.out, '[')
	end, err = r.scan.elements(at, depth, func(at int) (int, error) {
		if at < len(b) && b[at] != '{' {
			return at, invalidf("%s element %d is a JSON %s, not an object (offset %d)", what, n, kindOf(b[at]), at)
		}
		if n > 0 {
			r.out = append(r.out, ',')
		}
		n++
		return r.object(at, depth+1, fields, timed)
	})
	r.out = append(r.out, ']')
	return n, end, err
}

// objectsOrNull rewrites the value at src[at], of a member at depth, that
// must be an array of objects or null.
func (r *rewriter) objectsOrNull(at, depth int, fields fieldFunc, what string) (int, error) {
	b := r.scan.src
	if at < len(b) && b[at] == '[' {
		_, end, err := r.objects(at, depth+1, fields, false, what)
		return end, err
	}
	if at < len(b) && b[at] != 'n' {
		return at, invalidf("%s is a JSON %s, not an array (offset %d)", what, kindOf(b[at]), at)
	}
	return r.keep(at, depth)
}

// fieldValue rewrites the value at src[at] of a member of the given kind
// and returns the offset past it.
func (r *rewriter) fieldValue(at, depth int, kind fieldKind) (int, error) {
	s := &r.scan
	if kind == legs {
		return r.objectsOrNull(at, depth, legFields, "legs")
	}
	end, err := s.value(at, depth)
	if err != nil {
		return end, err
	}
	if err := r.written(at, end, kind); err != nil {
		return at, err
	}
	return end, nil
}

// written writes the value src[at:end], already scanned, of a member of
// the given kind (not legs).
func (r *rewriter) written(at, end int, kind fieldKind) error {
	v := r.scan.src[at:end]
	var err error
	switch kind {
	case keep:
		if v[0] == '{' || v[0] == '[' {
			r.out = appendCompact(r.out, v)
		} else {
			r.out = append(r.out, v...)
		}
		return nil
	case dec:
		err = r.decimal(v)
	default:
		err = r.price(v)
	}
	if err != nil {
		return fmt.Errorf("%w (offset %d)", err, at)
	}
	return nil
}

// keep copies the value at src[at], compacted, and returns the offset past
// it.
func (r *rewriter) keep(at, depth int) (int, error) {
	end, err := r.scan.value(at, depth)
	if err != nil {
		return end, err
	}
	return end, r.written(at, end, keep)
}

// decimal writes a decimal field (SHAPES.md "Per endpoint"): strings and
// null are copied; a JSON number, which variant B may send, becomes a
// string: of the same characters in plain notation, converted exactly to
// plain notation from exponent form (docs/CONTRACT.md "Conventions": decimals are
// plain decimal strings).
func (r *rewriter) decimal(v []byte) error {
	switch c := v[0]; {
	case c == '"' || c == 'n':
		r.out = append(r.out, v...)
		return nil
	case c != '-' && !isDigit(c):
		return invalidf("decimal is a JSON %s", kindOf(c))
	}
	r.out = append(r.out, '"')
	if !hasExponent(v) {
		r.out = append(r.out, v...)
	} else {
		d, err := parseDecimal(v) // a JSON number: fails only on the exponent cap
		if err != nil {
			return err
		}
		r.out = d.appendShifted(r.out, 0)
	}
	r.out = append(r.out, '"')
	return nil
}

// hasExponent reports whether the JSON number v is in exponent form.
func hasExponent(v []byte) bool {
	for _, c := range v {
		if c == 'e' || c == 'E' {
			return true
		}
	}
	return false
}

// price writes a price field: a decimal string, shifted from cents when
// ShiftCents (docs/CONTRACT.md "Conventions", price scale). null stays null; any
// other value is not a price.
func (r *rewriter) price(v []byte) error {
	d := v
	switch c := v[0]; {
	case c == 'n':
		r.out = append(r.out, v...)
		return nil
	case c == '"':
		d = r.textOf(v)
	case c != '-' && !isDigit(c):
		return invalidf("price is a JSON %s", kindOf(c))
	}
	if r.opt.ShiftCents {
		r.out = append(r.out, '"')
		var err error
		if r.out, err = ShiftCents(r.out, d); err != nil {
			return err
		}
		r.out = append(r.out, '"')
		return nil
	}
	dd, err := parseDecimal(d)
	if err != nil {
		return err
	}
	if hasExponent(d) {
		// Already 0..1 (price_scale: unit), but variant A prices are plain
		// decimal strings like every decimal: the exponent goes, exactly.
		r.out = append(r.out, '"')
		r.out = dd.appendShifted(r.out, 0)
		r.out = append(r.out, '"')
		return nil
	}
	if v[0] == '"' {
		r.out = append(r.out, v...) // its digits as written
		return nil
	}
	r.out = append(r.out, '"')
	r.out = append(r.out, v...)
	r.out = append(r.out, '"')
	return nil
}

// kindOf names the kind of the JSON value starting with c, for errors.
func kindOf(c byte) string {
	switch c {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	if c == '-' || isDigit(c) {
		return "number"
	}
	return "invalid value"
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
// are integers (docs/CONTRACT.md "Conventions"); anything else is no time at all.
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

// appendCompact appends the valid JSON container v without insignificant
// whitespace, leaving strings and numbers as written.
func appendCompact(dst, v []byte) []byte {
	inString := false
	start := 0
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
		case ' ', '\t', '\n', '\r':
			dst = append(dst, v[start:i]...)
			start = i + 1
		}
	}
	return append(dst, v[start:]...)
}
