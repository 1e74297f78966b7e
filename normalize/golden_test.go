package normalize

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

var update = flag.Bool("update", false, "rewrite the golden files testdata/*.a.json")

// goldens pair each testdata/<name>.b.json (a variant B body as the legacy
// host sends it) with testdata/<name>.a.json, the exact bytes Rewrite must
// produce. The .a.json files are the contract: after -update, read them
// (one line each; `jq . file` to view).
var goldens = []struct {
	name string
	opt  Options
	meta Meta
}{
	{"orderbook", Options{Shape: OrderBook, TimeField: "timestamp"},
		Meta{Items: 3, NextCursor: true, MaxTime: 1731000002000, HasTime: true}},
	{"activity", Options{Shape: Activity, ShiftCents: true, TimeField: "blockTimestamp"},
		Meta{Items: 3, NextCursor: true, MaxTime: 1731002000, HasTime: true}},
	{"transfers", Options{Shape: Transfers, TimeField: "blockTimestamp"},
		Meta{Items: 2, MaxTime: 1731003600, HasTime: true}},
	{"combo_positions", Options{Shape: ComboPositions, ShiftCents: true, TimeField: "recentTradeTime"},
		Meta{Items: 1, MaxTime: 1730995000, HasTime: true}},
	{"positions_closed", Options{Shape: Positions, ShiftCents: true, TimeField: "recentTradeTime"},
		Meta{Items: 1, NextCursor: true, MaxTime: 1731000500, HasTime: true}},
	{"positions_open", Options{Shape: Positions, ShiftCents: true},
		Meta{Items: 1}},
	{"transaction_trade", Options{Shape: Transaction, ShiftCents: true}, Meta{}},
	{"transaction_combo", Options{Shape: Transaction, ShiftCents: true}, Meta{}},
	{"transaction_null", Options{Shape: Transaction, ShiftCents: true}, Meta{DataNull: true}},
	{"wallet", Options{Shape: WalletAddress}, Meta{}},
	{"wallet_null", Options{Shape: WalletAddress}, Meta{DataNull: true}},
}

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGolden(t *testing.T) {
	for _, g := range goldens {
		t.Run(g.name, func(t *testing.T) {
			got, meta, err := Rewrite(nil, readFile(t, g.name+".b.json"), g.opt)
			if err != nil {
				t.Fatalf("Rewrite: %v", err)
			}
			if err := checkEnvelope(got); err != nil {
				t.Errorf("output %s: %v", got, err)
			}
			if meta != g.meta {
				t.Errorf("Meta = %+v, want %+v", meta, g.meta)
			}
			path := filepath.Join("testdata", g.name+".a.json")
			if *update {
				if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want := bytes.TrimSuffix(readFile(t, g.name+".a.json"), []byte("\n"))
			if !bytes.Equal(got, want) {
				t.Errorf("Rewrite differs from %s (run with -update, then read the diff)\ngot:  %s\nwant: %s", path, got, want)
			}
			// Variant A input passes through: the golden output, read back
			// as upstream, must come out unchanged with the same Meta.
			again, meta2, err := Rewrite(nil, got, g.opt)
			if err != nil || !bytes.Equal(again, got) || meta2 != meta {
				t.Errorf("A passthrough of the golden: %v, Meta %+v\n%s", err, meta2, again)
			}
			// The same body compact, as the legacy host sends it: members
			// written as they came are copied in runs (values.go), and
			// the page must not change.
			if g.opt.Shape == OrderBook {
				return // its data passes through whitespace and all
			}
			compact := jsontext.Value(readFile(t, g.name+".b.json"))
			if err := compact.Compact(); err != nil {
				t.Fatal(err)
			}
			got2, meta3, err := Rewrite(nil, compact, g.opt)
			if err != nil || !bytes.Equal(got2, want) || meta3 != meta {
				t.Errorf("the compact body: %v, Meta %+v\ngot:  %s\nwant: %s", err, meta3, got2, want)
			}
		})
	}
}

// TestGoldenOrderBookBytes: order book data passes through byte for byte
// (SHAPES.md 1), whitespace included.
func TestGoldenOrderBookBytes(t *testing.T) {
	src := readFile(t, "orderbook.b.json")
	got, _, err := Rewrite(nil, src, Options{Shape: OrderBook})
	if err != nil {
		t.Fatal(err)
	}
	start := bytes.Index(src, []byte(`{"items"`))
	end := bytes.LastIndexByte(src, '}')
	data := src[start : bytes.LastIndexByte(src[:end], '}')+1]
	if want := SuccessPrefix + string(data) + "}"; string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// checkEnvelope returns an error unless out is valid JSON (as jsontext
// validates by default) and an object whose first members are message,
// status_code "1" and data, in that order.
func checkEnvelope(out []byte) error {
	if !jsontext.Value(out).IsValid() {
		return errors.New("not valid JSON")
	}
	d := jsontext.NewDecoder(bytes.NewReader(out))
	if tok, _ := d.ReadToken(); tok.Kind() != '{' {
		return errors.New("not an object")
	}
	for _, want := range []struct{ name, value string }{
		{"message", ""}, {"status_code", "1"}, {"data", ""},
	} {
		tok, err := d.ReadToken()
		if err != nil || tok.String() != want.name {
			return fmt.Errorf("member %q where %q was expected", tok.String(), want.name)
		}
		if want.name == "data" {
			break
		}
		v, err := d.ReadToken()
		if err != nil || v.Kind() != '"' || (want.value != "" && v.String() != want.value) {
			return fmt.Errorf("%s is %v", want.name, v)
		}
	}
	return nil
}
