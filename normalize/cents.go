package normalize

import "fmt"

// maxExponent bounds the exponent of a decimal in exponent form. A body of a
// few bytes such as "1e999999999" would otherwise ask for a gigabyte of zeros;
// no price or quantity of docs/CONTRACT.md "Conventions" comes near 10^1000.
const maxExponent = 1000

// decimal is a parsed decimal string: sign, the digits before and after the
// point (slices of the input), and the exponent. Its value is
// (-1)^neg × int.frac × 10^exp.
type decimal struct {
	neg       bool
	int, frac []byte
	exp       int
}

// parseDecimal accepts -?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)? with |exp| <=
// maxExponent. Unlike a JSON number it allows leading zeros ("007"), since an
// upstream string is not bound by JSON number grammar and the value is still
// unambiguous. Everything else (a '+' sign, ".5", "5.", "", "0x10", spaces)
// is rejected: see the package documentation for why.
func parseDecimal(s []byte) (decimal, error) {
	var d decimal
	i := 0
	if i < len(s) && s[i] == '-' {
		d.neg = true
		i++
	}
	start := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	if i == start {
		return d, fmt.Errorf("%w: %q is not a decimal", errInvalid, s)
	}
	d.int = s[start:i]
	if i < len(s) && s[i] == '.' {
		i++
		start = i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == start {
			return d, fmt.Errorf("%w: %q is not a decimal", errInvalid, s)
		}
		d.frac = s[start:i]
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		negExp := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			negExp = s[i] == '-'
			i++
		}
		start = i
		for ; i < len(s) && isDigit(s[i]); i++ {
			d.exp = d.exp*10 + int(s[i]-'0')
			if d.exp > maxExponent {
				return d, fmt.Errorf("%w: exponent of %q exceeds %d", errInvalid, s, maxExponent)
			}
		}
		if i == start {
			return d, fmt.Errorf("%w: %q is not a decimal", errInvalid, s)
		}
		if negExp {
			d.exp = -d.exp
		}
	}
	if i != len(s) {
		return d, fmt.Errorf("%w: %q is not a decimal", errInvalid, s)
	}
	return d, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// ShiftCents appends the exact decimal value of s/100 for a decimal string s
// (cents -> 0..1, docs/CONTRACT.md "Conventions": variant B states prices in cents).
//
// The shift moves the decimal point on the digits; no float is involved, so
// every digit of a long decimal survives. The result is in plain notation
// with no exponent, no leading zeros beyond a single "0" before the point, no
// trailing zeros after it, no trailing '.', and no sign on zero: "78.0" ->
// "0.78", "5" -> "0.05", "100" -> "1", "-0" -> "0", "1.5E-3" -> "0.000015".
// On error dst is returned unchanged with an error wrapping errInvalid.
func ShiftCents(dst, s []byte) ([]byte, error) {
	d, err := parseDecimal(s)
	if err != nil {
		return dst, err
	}
	return d.appendShifted(dst, -2), nil
}

// appendShifted appends d × 10^shift in plain notation.
func (d decimal) appendShifted(dst []byte, shift int) []byte {
	// View the digits as one string D = int+frac with the point after p
	// digits; all positions below are indexes into D.
	n := len(d.int) + len(d.frac)
	p := len(d.int) + d.exp + shift
	at := func(i int) byte {
		if i < len(d.int) {
			return d.int[i]
		}
		return d.frac[i-len(d.int)]
	}
	lo := 0
	for lo < n && at(lo) == '0' {
		lo++
	}
	if lo == n {
		return append(dst, '0') // zero, including "-0" and "0.000e5"
	}
	hi := n
	for hi-1 >= p && at(hi-1) == '0' { // trailing zeros of the fraction
		hi--
	}
	if d.neg {
		dst = append(dst, '-')
	}
	switch {
	case p <= lo: // all significant digits are after the point
		dst = append(dst, '0', '.')
		dst = appendZeros(dst, lo-p)
		dst = d.appendDigits(dst, lo, hi)
	case p >= hi: // an integer
		dst = d.appendDigits(dst, lo, hi)
		dst = appendZeros(dst, p-hi)
	default:
		dst = d.appendDigits(dst, lo, p)
		dst = append(dst, '.')
		dst = d.appendDigits(dst, p, hi)
	}
	return dst
}

// appendDigits appends D[from:to] of the concatenated digits int+frac.
func (d decimal) appendDigits(dst []byte, from, to int) []byte {
	if from < len(d.int) {
		dst = append(dst, d.int[from:min(to, len(d.int))]...)
	}
	if to > len(d.int) {
		dst = append(dst, d.frac[max(from-len(d.int), 0):to-len(d.int)]...)
	}
	return dst
}

func appendZeros(dst []byte, n int) []byte {
	for ; n > 0; n-- {
		dst = append(dst, '0')
	}
	return dst
}
