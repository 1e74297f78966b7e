package normalize

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// scanValid reports whether the scanner accepts b as one JSON value.
func scanValid(b []byte) bool {
	var s scanner
	s.reset(b)
	end, err := s.value(s.ws(0), 0)
	return err == nil && s.ws(end) == len(b)
}

// scanCases are held to jsontext's verdict by TestScannerMatchesJSONText
// and seed FuzzScanner.
var scanCases = []string{
	``, ` `, `{}`, `[]`, `""`, `0`, `-0`, `-0.0e-0`, `1E+2`, `01`, `-`, `1.`, `.1`, `1e`, `+1`, `0x1`,
	`true`, `tru`, `nul`, `null `, ` null`, `nulll`, `[1,]`, `[,1]`, `{"a":1,}`, `{"a"}`, `{"a":}`, `{1:2}`,
	`{"a":1}{"b":2}`, `[1] x`, `"a\"b"`, `"\/\b\f\n\r\t\\"`, `"\x"`, `"\u00e9"`, `"\u00E9"`, `"\u12"`, `"\u12g4"`,
	`"\ud83d\ude00"`, `"\ud83d"`, `"\ude00"`, `"\ud83d\u0041"`, `"\ud83dx"`, `"\ud83d\ud83d"`,
	"\"\xc3\xa9\"", "\"\xc3\"", "\"\xc0\x80\"", "\"\xed\xa0\x80\"", "\"\xef\xbf\xbd\"", "\"\xf4\x90\x80\x80\"",
	"\"a\nb\"", "\"\x7f\"", "\"\x1f\"", "\ufeff{}", "{\"a\":1,\"a\":2}", `{"a":1,"\u0061":2}`, `{"\u00e9":1,"é":2}`,
	`{"a":{"a":1},"b":{"a":2}}`, `{"a":[{"a":1,"b":2},{"a":1}]}`, `{"":1,"":2}`, `{"ab":1,"ba":2,"b":3}`,
	manyMembers(40, false), manyMembers(40, true), manyMembers(33, true), manyMembers(32, true), manyMembers(31, true),
	strings.Repeat("[", 50) + strings.Repeat("]", 50), strings.Repeat("[", 50) + strings.Repeat("]", 49),
	"\t\n\r {\"a\" : [ 1 , 2 ] }\r\n",
}

// manyMembers has n members, past the linear-scan limit, the last one a
// duplicate of the first when dup.
func manyMembers(n int, dup bool) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		fmt.Fprintf(&b, `"k%d":%d,`, i, i)
	}
	if dup {
		b.WriteString(`"k0":0}`)
	} else {
		b.WriteString(`"last":0}`)
	}
	return b.String()
}

func TestScannerMatchesJSONText(t *testing.T) {
	for _, c := range scanCases {
		if got, want := scanValid([]byte(c)), jsontext.Value(c).IsValid(); got != want {
			t.Errorf("scanner says %v, jsontext %v: %q", got, want, c)
		}
	}
}

// TestNestingLimit: both engines accept exactly jsontext's nesting limit,
// counted over the whole body, so the output is always valid.
func TestNestingLimit(t *testing.T) {
	// The envelope, data, items and an item are 4 levels.
	nested := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, shape := range []Shape{OrderBook, Activity, Transaction} {
		for _, k := range []int{maxDepth - 4, maxDepth - 3} {
			data := `{"items":[{"x":` + nested(k) + `}]}`
			if shape == Transaction {
				data = `{"actions":[{"x":` + nested(k) + `}]}`
			}
			src := []byte(b(data))
			out, _, err := Rewrite(nil, src, Options{Shape: shape})
			valid := 4+k <= maxDepth
			if jsontext.Value(src).IsValid() != valid {
				t.Fatalf("test body of depth %d: jsontext disagrees", 4+k)
			}
			switch {
			case valid && err != nil:
				t.Errorf("%v, depth %d: %v", shape, 4+k, err)
			case valid && !jsontext.Value(out).IsValid():
				t.Errorf("%v, depth %d: output is not valid JSON", shape, 4+k)
			case !valid && !errors.Is(err, errInvalid):
				t.Errorf("%v, depth %d: err = %v, want errInvalid", shape, 4+k, err)
			}
		}
	}
}
