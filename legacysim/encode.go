package legacysim

import (
	"slices"
	"strconv"
)

// Decimal quantities are strings (docs/CONTRACT.md#conventions), and no
// float may touch them (docs/ARCHITECTURE.md, "Exact decimals"): every
// amount is an int64 in fixed units and is
// printed here. The units used across the package:
//
//	micro   1e-6: USDC amounts, shares, and prices in USD per share
//	cents   order book prices are whole cents, printed on the 0..1 scale
//	hundredths   order book sizes and percentages
const (
	micro    = 1_000_000
	centUSD  = micro / 100 // one cent in micro-USD
	tenthCnt = centUSD / 10
)

// pow10 returns 10^n for the small scales used here.
func pow10(n int) int64 {
	p := int64(1)
	for range n {
		p *= 10
	}
	return p
}

// appendDec appends v/10^scale in plain decimal form without trailing
// zeros: appendDec(785000, 4) is "78.5", appendDec(50000, 4) is "5".
func appendDec(dst []byte, v int64, scale int) []byte {
	if v < 0 {
		dst = append(dst, '-')
		v = -v
	}
	p := pow10(scale)
	dst = strconv.AppendInt(dst, v/p, 10)
	frac := v % p
	if frac == 0 {
		return dst
	}
	var tmp [18]byte
	for i := scale - 1; i >= 0; i-- {
		tmp[i] = byte('0' + frac%10)
		frac /= 10
	}
	n := scale
	for tmp[n-1] == '0' {
		n--
	}
	dst = append(dst, '.')
	return append(dst, tmp[:n]...)
}

// appendCents prints a micro-USD price in cents, the variant B price scale
// of activity, positions and transactions (docs/CONTRACT.md#conventions:
// 78.0 means 78 cents).
func appendCents(dst []byte, priceMicro int64) []byte {
	return appendDec(dst, priceMicro, 4)
}

// appendMicro prints a micro-unit amount (USDC or shares).
func appendMicro(dst []byte, v int64) []byte { return appendDec(dst, v, 6) }

// appendQMicro prints a micro-unit amount as a JSON string.
func appendQMicro(dst []byte, v int64) []byte {
	dst = append(dst, '"')
	dst = appendMicro(dst, v)
	return append(dst, '"')
}

// appendQCents prints a micro-USD price in cents as a JSON string.
func appendQCents(dst []byte, priceMicro int64) []byte {
	dst = append(dst, '"')
	dst = appendCents(dst, priceMicro)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// appendStr appends s as a JSON string. Generated text is plain ASCII, but
// titles end up inside sentences with quotes, so quoting must be right.
func appendStr(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// appendField appends `,"name":` followed by the JSON string s.
func appendField(dst []byte, name, s string) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	dst = append(dst, '"', ':')
	return appendStr(dst, s)
}

// appendKey appends `,"name":` ready for a value.
func appendKey(dst []byte, name string) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	return append(dst, '"', ':')
}

// appendIntField appends `,"name":v`.
func appendIntField(dst []byte, name string, v int64) []byte {
	return strconv.AppendInt(appendKey(dst, name), v, 10)
}

// appendBoolField appends `,"name":true|false`.
func appendBoolField(dst []byte, name string, v bool) []byte {
	return strconv.AppendBool(appendKey(dst, name), v)
}

func appendInt(dst []byte, v int64) []byte { return strconv.AppendInt(dst, v, 10) }

// appendSpaces appends n spaces: JSON whitespace after the envelope, for
// the PadBytes fault. n <= 0 appends nothing (slices.Grow panics on a
// negative n).
func appendSpaces(dst []byte, n int) []byte {
	if n <= 0 {
		return dst
	}
	dst = slices.Grow(dst, n)
	for range n {
		dst = append(dst, ' ')
	}
	return dst
}
