package orderbook

import "errors"

// Prices and sizes are decimal strings (docs/CONTRACT.md "Conventions").
// Two spellings of one price ("0.5", "0.50", "00.5") must name one level,
// and a float would merge prices that differ beyond its precision, so
// levels are keyed by a canonical spelling and ordered by comparing digits.

var errDecimal = errors.New("not a decimal string")

// canonical returns the canonical spelling of the decimal s: leading zeros
// of the integer part, trailing zeros of the fraction and a trailing point
// dropped ("00.50" -> "0.5", "1.00" -> "1", "0.000" -> "0"). It is always
// a substring of s, so it costs no copy. Accepted: digits, optionally
// followed by a point and more digits ("1." is 1); no sign, no exponent.
func canonical(s []byte) ([]byte, error) {
	point := len(s)
	for i, c := range s {
		if c == '.' {
			point = i
			break
		}
		if c < '0' || c > '9' {
			return nil, errDecimal
		}
	}
	if point == 0 {
		return nil, errDecimal
	}
	end := len(s)
	for i := point + 1; i < len(s); i++ {
		if c := s[i]; c < '0' || c > '9' {
			return nil, errDecimal
		}
	}
	for end > point+1 && s[end-1] == '0' {
		end--
	}
	if end == point+1 || end == point {
		end = point // no fraction left: drop the point too
	}
	start := 0
	for start < point-1 && s[start] == '0' {
		start++
	}
	return s[start:end], nil
}

// isZero reports whether the canonical decimal c is zero.
func isZero(c []byte) bool { return len(c) == 1 && c[0] == '0' }

// compareCanonical orders two canonical decimals by value. Canonical
// integer parts have no leading zeros, so a longer one is larger; equal
// lengths and fractions without trailing zeros compare digit by digit.
func compareCanonical(a, b string) int {
	ai, bi := intLen(a), intLen(b)
	if ai != bi {
		if ai < bi {
			return -1
		}
		return 1
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func intLen(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return i
		}
	}
	return len(s)
}
