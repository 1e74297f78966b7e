package normalize

import (
	"bytes"
	"errors"
	"math/big"
	"regexp"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// FuzzRewrite: Rewrite never panics; it fails with errInvalid or a
// FailureError and leaves dst alone, or it writes a valid variant A body
// (message, status_code "1", data first) from a valid source, which then
// passes through a second Rewrite unchanged.
func FuzzRewrite(f *testing.F) {
	for _, g := range goldens {
		src := readFile(f, g.name+".b.json")
		for s := OrderBook; s <= WalletAddress; s++ {
			f.Add(src, uint8(s), g.opt.ShiftCents, g.opt.TimeField)
		}
	}
	for _, src := range []string{
		`{"success":false,"code":"429","message":"Too many requests. Please slow down.","data":null}`,
		`{"message":"Invalid txHash format","status_code":"0","data":null}`,
		ok + `{"items":[{"price":"0.5"}],"nextCursor":null}}`,
		`{"data":{"items":[{"price":1e2}]},"success":true}`,
		ok + `{"items":[{"fee":2.5E+3,"size":-1e-7,"usdcSize":12.50}]}}`,
		b(`{"items":[{"fee":1.5e-3,"size":0e9,"usdcSize":1e1001}]}`),
	} {
		f.Add([]byte(src), uint8(Activity), true, "")
	}
	f.Fuzz(func(t *testing.T, src []byte, shape uint8, shift bool, timeField string) {
		opt := Options{Shape: Shape(shape%uint8(WalletAddress) + 1), ShiftCents: shift, TimeField: timeField}
		out, meta, err := Rewrite([]byte("dst"), src, opt)
		if err != nil {
			if string(out) != "dst" || meta != (Meta{}) {
				t.Fatalf("error %v with output %q, Meta %+v", err, out, meta)
			}
			if fe, isFailure := errors.AsType[*FailureError](err); isFailure {
				code, message, ok := Failure(src)
				if !ok || code != fe.Code || message != fe.Message {
					t.Fatalf("Rewrite: %v; Failure: %q, %q, %v", err, code, message, ok)
				}
			} else if !errors.Is(err, errInvalid) {
				t.Fatalf("error %v is neither errInvalid nor a FailureError", err)
			}
			return
		}
		body := out[len("dst"):]
		if err := checkEnvelope(body); err != nil {
			t.Fatalf("output %q: %v", body, err)
		}
		if !jsontext.Value(src).IsValid() {
			t.Fatalf("accepted invalid JSON %q", src)
		}
		again, meta2, err := Rewrite(nil, body, opt)
		if err != nil || !bytes.Equal(again, body) || meta2 != meta {
			t.Fatalf("output read back: %v, Meta %+v (was %+v)\n%s\n%s", err, meta2, meta, body, again)
		}
		// Whitespace in the source changes nothing but whitespace (order
		// book data and variant A pass through as they came): the compact
		// source, whose members the rewrite copies in runs, gives the page
		// of an indented one, whose members it copies one by one.
		compact, indented := jsontext.Value(bytes.Clone(src)), jsontext.Value(bytes.Clone(src))
		if compact.Compact() != nil || indented.Indent() != nil {
			t.Fatalf("jsontext refused %q, which Rewrite accepted", src)
		}
		want := jsontext.Value(bytes.Clone(body))
		if err := want.Compact(); err != nil {
			t.Fatal(err)
		}
		for _, in := range []jsontext.Value{compact, indented} {
			got, meta3, err := Rewrite(nil, in, opt)
			if err == nil {
				err = (*jsontext.Value)(&got).Compact()
			}
			if err != nil || !bytes.Equal(got, want) || meta3 != meta {
				t.Fatalf("source %q: %v, Meta %+v (was %+v)\ngot:  %s\nwant: %s", in, err, meta3, meta, got, want)
			}
		}
	})
}

// plainDecimal is the only form ShiftCents writes.
var plainDecimal = regexp.MustCompile(`^(0|-?[1-9][0-9]*|-?0\.[0-9]*[1-9]|-?[1-9][0-9]*\.[0-9]*[1-9])$`)

// FuzzShiftCents: no panic; on success the output is a plain decimal whose
// value times 100 is the input's, exactly (math/big, never floats).
func FuzzShiftCents(f *testing.F) {
	for _, s := range []string{"78.0", "78.5", "0", "-0", "007", "0.000001", "-3.25", "1e2", "1.5E-3", "-2e+1", "+5", ".5", "5.", "", "1e1000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, err := ShiftCents(nil, []byte(s))
		if err != nil {
			if !errors.Is(err, errInvalid) || out != nil {
				t.Fatalf("ShiftCents(%q) = %q, %v", s, out, err)
			}
			return
		}
		if !plainDecimal.Match(out) {
			t.Fatalf("ShiftCents(%q) = %q, not a plain decimal", s, out)
		}
		in, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("ShiftCents accepted %q, which is no number", s)
		}
		got, _ := new(big.Rat).SetString(string(out))
		if got.Mul(got, big.NewRat(100, 1)).Cmp(in) != 0 {
			t.Fatalf("ShiftCents(%q) = %q: times 100 is %s", s, out, got.RatString())
		}
	})
}

// FuzzScanner: the scanner accepts exactly what jsontext accepts by default.
func FuzzScanner(f *testing.F) {
	for _, c := range scanCases {
		f.Add([]byte(c))
	}
	for _, g := range goldens {
		f.Add(readFile(f, g.name+".b.json"))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := scanValid(b), jsontext.Value(b).IsValid(); got != want {
			t.Fatalf("scanner says %v, jsontext %v: %q", got, want, b)
		}
	})
}
