package normalize

import (
	"fmt"
	"strings"
	"testing"
)

// items builds a list body whose items carry the given JSON values of "t".
func items(cursor string, times ...string) string {
	parts := make([]string, len(times))
	for i, t := range times {
		if t == "" {
			parts[i] = `{"price":"1"}`
		} else {
			parts[i] = fmt.Sprintf(`{"price":"1","t":%s}`, t)
		}
	}
	return b(`{"items":[` + strings.Join(parts, ",") + `],"nextCursor":` + cursor + `}`)
}

// TestMeta runs each case through both engines: the token rewrite
// (Activity) and the scanner pass-through (OrderBook), which must agree.
func TestMeta(t *testing.T) {
	tests := []struct {
		name      string
		src       string
		timeField string
		want      Meta
	}{
		{"items and cursor", items(`"eyJpZCI6MX0="`, "", ""), "", Meta{Items: 2, NextCursor: true}},
		{"last page", items(`null`, ""), "", Meta{Items: 1}},
		{"no nextCursor member", b(`{"items":[{"t":1}]}`), "", Meta{Items: 1}},
		{"max time", items(`null`, "1731000000", "1731000500", "1730000000"), "t", Meta{Items: 3, MaxTime: 1731000500, HasTime: true}},
		{"negative and zero", items(`null`, "-5", "0"), "t", Meta{Items: 2, MaxTime: 0, HasTime: true}},
		{"int64 bounds", items(`null`, "-9223372036854775808", "9223372036854775807"), "t", Meta{Items: 2, MaxTime: 9223372036854775807, HasTime: true}},
		{"one item without time", items(`null`, "1731000000", ""), "t", Meta{Items: 2}},
		{"time as string", items(`null`, `"1731000000"`), "t", Meta{Items: 1}},
		{"time not integer", items(`null`, "1731000000.5"), "t", Meta{Items: 1}},
		{"time in exponent form", items(`null`, "1e9"), "t", Meta{Items: 1}},
		{"time overflows", items(`null`, "9223372036854775808"), "t", Meta{Items: 1}},
		{"time null", items(`null`, "null"), "t", Meta{Items: 1}},
		{"empty page", items(`null`), "t", Meta{}},
		{"TimeField unset", items(`null`, "5"), "", Meta{Items: 1}},
		{"nested time ignored", b(`{"items":[{"x":{"t":9},"t":1}]}`), "t", Meta{Items: 1, MaxTime: 1, HasTime: true}},
		{"data null", b(`null`), "t", Meta{DataNull: true}},
	}
	for _, tc := range tests {
		for _, shape := range []Shape{Activity, OrderBook} {
			t.Run(tc.name+"/"+shape.String(), func(t *testing.T) {
				_, meta, err := Rewrite(nil, []byte(tc.src), Options{Shape: shape, TimeField: tc.timeField})
				if err != nil {
					t.Fatal(err)
				}
				if meta != tc.want {
					t.Errorf("Meta = %+v, want %+v", meta, tc.want)
				}
			})
		}
	}
}

func TestMetaSingleShapes(t *testing.T) {
	tests := []struct {
		name string
		src  string
		opt  Options
		want Meta
	}{
		{"transaction found", b(`{"txHash":"0x1","actions":[]}`), Options{Shape: Transaction}, Meta{}},
		{"transaction not indexed", b(`null`), Options{Shape: Transaction}, Meta{DataNull: true}},
		{"A transaction not indexed", ok + `null}`, Options{Shape: Transaction}, Meta{DataNull: true}},
		{"wallet found", b(`{"walletAddress":"` + addr + `"}`), Options{Shape: WalletAddress}, Meta{}},
		{"wallet null", b(`{"walletAddress":null}`), Options{Shape: WalletAddress}, Meta{DataNull: true}},
		{"wallet data null", b(`null`), Options{Shape: WalletAddress}, Meta{DataNull: true}},
		{"A wallet null", ok + `{"walletAddress":null}}`, Options{Shape: WalletAddress}, Meta{DataNull: true}},
		{"TimeField ignored off lists", b(`{"blockTimestamp":5}`), Options{Shape: Transaction, TimeField: "blockTimestamp"}, Meta{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, meta, err := Rewrite(nil, []byte(tc.src), tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if meta != tc.want {
				t.Errorf("Meta = %+v, want %+v", meta, tc.want)
			}
		})
	}
}
