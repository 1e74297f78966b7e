package normalize

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

const (
	addr = "0xba0db53800190293d9dca97c239dec81749f7ab8"
	ok   = `{"message":"OK","status_code":"1","data":`
)

// b wraps data in a variant B success envelope.
func b(data string) string {
	return `{"success":true,"code":"0","message":"success","data":` + data + `}`
}

func TestRewrite(t *testing.T) {
	activity := Options{Shape: Activity, ShiftCents: true}
	tests := []struct {
		name string
		src  string
		opt  Options
		want string
	}{
		// Envelopes: docs/CONTRACT.md "Response envelopes", SHAPES.md "Envelopes".
		{"data first", `{"data":{"walletAddress":"` + addr + `"},"message":"success","code":"0","success":true}`,
			Options{Shape: WalletAddress}, ok + `{"walletAddress":"` + addr + `"}}`},
		{"success last after data", `{"code":"0","data":{"items":[{"price":"50"}],"nextCursor":null},"success":true}`,
			activity, ok + `{"items":[{"price":"0.5"}],"nextCursor":null}}`},
		{"no code, no message", `{"success":true,"data":{"walletAddress":null}}`,
			Options{Shape: WalletAddress}, ok + `{"walletAddress":null}}`},
		{"unknown envelope keys dropped", `{"success":true,"requestId":"r-1","extra":{"a":[1,2]},"data":null,"code":"0"}`,
			Options{Shape: Transaction}, ok + `null}`},
		{"whitespace everywhere", " \n{ \"success\" : true ,\t\"data\" : { \"items\" : [ { \"price\" : \"5\" , \"x\" : [ 1 , { \"y\" : 2 } ] } ] } } \n",
			activity, ok + `{"items":[{"price":"0.05","x":[1,{"y":2}]}]}}`},
		{"whitespace between compact members", b(`{"items":[{"a":1 ,"b":2, "c":"3","d":{"e" : 1},"f":[ ],"g":null,"size":"1","h":true}]}`),
			activity, ok + `{"items":[{"a":1,"b":2,"c":"3","d":{"e":1},"f":[],"g":null,"size":"1","h":true}]}}`},
		{"escaped names", `{"succ\u0065ss":true,"d\u0061ta":{"items":[{"pr\u0069ce":"5"}]}}`,
			activity, ok + `{"items":[{"pr\u0069ce":"0.05"}]}}`},

		// Variant A passes unchanged (SHAPES.md "Envelopes").
		{"A canonical", ok + `{"items":[{"price":"0.78","fee":0.5}],"nextCursor":null}}`,
			activity, ok + `{"items":[{"price":"0.78","fee":0.5}],"nextCursor":null}}`},
		{"A keys in other order", `{"data":{"items":[],"nextCursor":null} ,"status_code":"1","message":"OK"}`,
			activity, ok + `{"items":[],"nextCursor":null}}`},
		{"A wallet data null kept", `{"message":"OK","status_code":"1","data":null}`,
			Options{Shape: WalletAddress}, ok + `null}`},

		// Decimals and prices: docs/CONTRACT.md "Conventions"; docs/ARCHITECTURE.md.
		{"price number shifted", b(`{"items":[{"price":78.5,"size":12,"fee":1e-7}]}`),
			activity, ok + `{"items":[{"price":"0.785","size":"12","fee":"0.0000001"}]}}`},
		{"decimal number keeps its characters", b(`{"items":[{"size":12.50,"fee":0,"usdcSize":-0.0,"netSharesTransferred":-7}]}`),
			activity, ok + `{"items":[{"size":"12.50","fee":"0","usdcSize":"-0.0","netSharesTransferred":"-7"}]}}`},
		{"decimal exponent converted", b(`{"items":[{"size":2.5E+3,"fee":1e-7,"usdcSize":-1.50e-2,"netSharesTransferred":0e5}]}`),
			activity, ok + `{"items":[{"size":"2500","fee":"0.0000001","usdcSize":"-0.015","netSharesTransferred":"0"}]}}`},
		{"decimal exponent unshifted without ShiftCents", b(`{"items":[{"fee":25e-1,"price":2.5E1}]}`),
			Options{Shape: Activity}, ok + `{"items":[{"fee":"2.5","price":"25"}]}}`},
		{"price string in exponent form, unit scale", b(`{"items":[{"price":"7.8e-1"}]}`),
			Options{Shape: Activity}, ok + `{"items":[{"price":"0.78"}]}}`},
		{"decimal exponent at the cap", b(`{"items":[{"amount":1e1000},{"amount":-1E-1000}]}`),
			Options{Shape: Transfers}, ok + `{"items":[{"amount":"1` + strings.Repeat("0", 1000) + `"},{"amount":"-0.` + strings.Repeat("0", 999) + `1"}]}}`},
		{"decimal string in exponent form untouched", b(`{"items":[{"size":"1e-7"}]}`),
			activity, ok + `{"items":[{"size":"1e-7"}]}}`},
		{"fill and position decimals converted", b(`{"actions":[{"shares":1E2,"txValue":7.85e1,"fee":5e-2}]}`),
			Options{Shape: Transaction}, ok + `{"actions":[{"size":"100","usdcSize":"78.5","fee":"0.05"}],"comboActions":null}}`},
		{"price null stays null", b(`{"items":[{"price":null,"size":null}]}`),
			activity, ok + `{"items":[{"price":null,"size":null}]}}`},
		{"price exponent converted", b(`{"items":[{"price":"1.5E+1"},{"price":5e1}]}`),
			activity, ok + `{"items":[{"price":"0.15"},{"price":"0.5"}]}}`},
		{"price_scale unit", b(`{"items":[{"price":"0.78","size":"1","fee":0.5},{"price":0.5},{"price":"78.0"}]}`),
			Options{Shape: Activity}, ok + `{"items":[{"price":"0.78","size":"1","fee":"0.5"},{"price":"0.5"},{"price":"78.0"}]}}`},
		{"dec strings untouched", b(`{"items":[{"size":"1.50","usdcSize":"n/a"}]}`),
			activity, ok + `{"items":[{"size":"1.50","usdcSize":"n/a"}]}}`},
		{"unknown fields and nesting kept", b(`{"items":[{"a":{"price":"78"},"b":[{"price":"78"}]}],"nextCursor":null,"total":3}`),
			activity, ok + `{"items":[{"a":{"price":"78"},"b":[{"price":"78"}]}],"nextCursor":null,"total":3}}`},
		{"list data null", b(`null`), activity, ok + `null}`},
		{"empty items", b(`{"items":[],"nextCursor":null}`), activity, ok + `{"items":[],"nextCursor":null}}`},
		{"transfers amount number", b(`{"items":[{"amount":250.50,"type":"deposit"}]}`),
			Options{Shape: Transfers, ShiftCents: true}, ok + `{"items":[{"amount":"250.50","type":"deposit"}]}}`},

		// Transaction: SHAPES.md 7.
		{"trade without actions", b(`{"sourceType":"TRADE","profileAddress":"` + addr + `"}`),
			Options{Shape: Transaction}, ok + `{"sourceType":"TRADE","traderAddress":"` + addr + `","actions":null,"comboActions":null}}`},
		{"empty transaction", b(`{}`),
			Options{Shape: Transaction}, ok + `{"actions":null,"comboActions":null}}`},
		{"trade drops upstream comboActions", b(`{"comboActions":[{"x":1}],"sourceType":"TRADE","actions":[]}`),
			Options{Shape: Transaction}, ok + `{"sourceType":"TRADE","actions":[],"comboActions":null}}`},
		{"trader address: first of the two wins", b(`{"traderAddress":"0xa","profileAddress":"0xb","actions":null}`),
			Options{Shape: Transaction}, ok + `{"traderAddress":"0xa","actions":null,"comboActions":null}}`},
		{"fill renames collide: first wins", b(`{"actions":[{"tokenId":"1","assetId":"2","shares":3,"size":"4","marketLogo":"l","logo":"m","actor":"0xa"}]}`),
			Options{Shape: Transaction}, ok + `{"actions":[{"tokenId":"1","size":"3","logo":"l","traderAddress":"0xa"}],"comboActions":null}}`},
		{"fill: the other name of a field between kept ones", b(`{"actions":[{"tokenId":"1","assetId":"2","fee":"0.1","x":1,"logo":"l","marketLogo":"m"}]}`),
			Options{Shape: Transaction}, ok + `{"actions":[{"tokenId":"1","fee":"0.1","x":1,"logo":"l"}],"comboActions":null}}`},
		{"combo before sourceType", b(`{"marketSlug":"","marketId":"","actions":[{"shares":"2","price":"50","legs":null}],"sourceType":"COMBO"}`),
			Options{Shape: Transaction, ShiftCents: true}, ok + `{"marketSlug":null,"marketId":null,"actions":null,"sourceType":"COMBO","comboActions":[{"size":"2","price":"0.5","legs":null}]}}`},
		{"combo laid out as A", b(`{"sourceType":"COMBO","actions":null,"comboActions":[{"price":"50"}]}`),
			Options{Shape: Transaction, ShiftCents: true}, ok + `{"sourceType":"COMBO","actions":null,"comboActions":[{"price":"0.5"}]}}`},
		{"combo without fills", b(`{"sourceType":"COMBO"}`),
			Options{Shape: Transaction}, ok + `{"sourceType":"COMBO","actions":null,"comboActions":null}}`},
		{"other source type read as trade", b(`{"sourceType":"SPLIT","marketId":"1","actions":[{"assetId":"9"}]}`),
			Options{Shape: Transaction}, ok + `{"sourceType":"SPLIT","marketId":"1","actions":[{"tokenId":"9"}],"comboActions":null}}`},

		// Wallet: SHAPES.md 8.
		{"wallet extra keys kept", b(`{"walletAddress":"` + addr + `","signer":{"a" : 1}}`),
			Options{Shape: WalletAddress}, ok + `{"walletAddress":"` + addr + `","signer":{"a":1}}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := Rewrite(nil, []byte(tc.src), tc.opt)
			if err != nil {
				t.Fatalf("Rewrite: %v", err)
			}
			if string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			if err := checkEnvelope(got); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestRewriteAppends(t *testing.T) {
	dst := []byte("prefix:")
	got, _, err := Rewrite(dst, []byte(b(`null`)), Options{Shape: Transaction})
	if err != nil || string(got) != "prefix:"+ok+"null}" {
		t.Fatalf("got %q, %v", got, err)
	}
	got, _, err = Rewrite(dst, []byte(b(`{"items":[{"price":"x"}]}`)), Options{Shape: Activity, ShiftCents: true})
	if err == nil || string(got) != "prefix:" {
		t.Fatalf("on error got %q, %v; want dst unchanged", got, err)
	}
}

func TestRewriteInvalid(t *testing.T) {
	activity := Options{Shape: Activity, ShiftCents: true}
	tests := []struct {
		name string
		src  string
		opt  Options
	}{
		{"empty", ``, activity},
		{"whitespace", " \n", activity},
		{"not JSON", `success`, activity},
		{"array", `[{"success":true}]`, activity},
		{"string", `"ok"`, activity},
		{"null", `null`, activity},
		{"truncated", `{"success":true,"data":{"items":[`, activity},
		{"trailing garbage", b(`null`) + `x`, Options{Shape: Transaction}},
		{"two bodies", b(`null`) + b(`null`), Options{Shape: Transaction}},
		{"invalid UTF-8", b(`{"items":[{"logo":"` + "\xff" + `"}]}`), activity},
		{"invalid UTF-8 in passthrough", b(`{"items":[{"x":"` + "\xc3" + `"}]}`), Options{Shape: OrderBook}},
		{"control character", b(`{"walletAddress":"a` + "\n" + `"}`), Options{Shape: WalletAddress}},
		{"duplicate envelope key", `{"success":true,"data":null,"data":null}`, Options{Shape: Transaction}},
		{"duplicate item key", b(`{"items":[{"price":"1","price":"2"}]}`), activity},
		{"duplicate item key in passthrough", b(`{"items":[{"a":1,"\u0061":2}]}`), Options{Shape: OrderBook}},
		{"no envelope", `{"data":null}`, Options{Shape: Transaction}},
		{"both variants", `{"success":true,"status_code":"1","data":null}`, Options{Shape: Transaction}},
		{"success not boolean", `{"success":"true","data":null}`, Options{Shape: Transaction}},
		{"status_code unknown", `{"status_code":"2","data":null}`, Options{Shape: Transaction}},
		{"status_code number", `{"status_code":1,"data":null}`, Options{Shape: Transaction}},
		{"code contradicts success", `{"success":true,"code":"500","data":null}`, Options{Shape: Transaction}},
		{"success without data", `{"success":true,"code":"0"}`, Options{Shape: Transaction}},
		{"message not string", `{"success":true,"message":1,"data":null}`, Options{Shape: Transaction}},
		{"data not object", b(`[]`), activity},
		{"data string in passthrough", b(`"x"`), Options{Shape: OrderBook}},
		{"no items", b(`{"nextCursor":null}`), activity},
		{"no items in passthrough", b(`{"nextCursor":null}`), Options{Shape: OrderBook}},
		{"items not array", b(`{"items":{}}`), activity},
		{"items not array in passthrough", b(`{"items":"[]"}`), Options{Shape: OrderBook}},
		{"item not object", b(`{"items":[1]}`), activity},
		{"item not object in passthrough", b(`{"items":[null]}`), Options{Shape: OrderBook}},
		{"nextCursor number", b(`{"items":[],"nextCursor":1}`), activity},
		{"nextCursor number in passthrough", b(`{"items":[],"nextCursor":1}`), Options{Shape: OrderBook}},
		{"bad price", b(`{"items":[{"price":"abc"}]}`), activity},
		{"empty price", b(`{"items":[{"price":""}]}`), activity},
		{"price boolean", b(`{"items":[{"price":true}]}`), activity},
		{"bad price unit scale", b(`{"items":[{"price":"7.8.0"}]}`), Options{Shape: Activity}},
		{"price exponent too big", b(`{"items":[{"price":1e999999999}]}`), activity},
		{"decimal exponent too big", b(`{"items":[{"fee":1e1001}]}`), activity},
		{"decimal exponent too small", b(`{"items":[{"percentPnl":-5E-1001}]}`), Options{Shape: Positions}},
		{"decimal object", b(`{"items":[{"size":{}}]}`), activity},
		{"legs not array", b(`{"items":[{"legs":{}}]}`), Options{Shape: ComboPositions}},
		{"leg not object", b(`{"items":[{"legs":["x"]}]}`), Options{Shape: ComboPositions}},
		{"leg bad price", b(`{"items":[{"legs":[{"outcomePrice":"1/2"}]}]}`), Options{Shape: ComboPositions, ShiftCents: true}},
		{"transaction array", b(`[]`), Options{Shape: Transaction}},
		{"actions number", b(`{"actions":1}`), Options{Shape: Transaction}},
		{"comboActions string", b(`{"sourceType":"COMBO","comboActions":"x"}`), Options{Shape: Transaction}},
		{"fill not object", b(`{"actions":[[]]}`), Options{Shape: Transaction}},
		{"fill bad price", b(`{"actions":[{"price":"+5"}]}`), Options{Shape: Transaction, ShiftCents: true}},
		{"combo fill bad price", b(`{"sourceType":"COMBO","actions":[{"price":".5"}]}`), Options{Shape: Transaction, ShiftCents: true}},
		{"wallet without walletAddress", b(`{}`), Options{Shape: WalletAddress}},
		{"wallet without walletAddress in passthrough", ok + `{}}`, Options{Shape: WalletAddress}},
		{"walletAddress number", b(`{"walletAddress":1}`), Options{Shape: WalletAddress}},
		{"wallet array", b(`[]`), Options{Shape: WalletAddress}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, meta, err := Rewrite([]byte("keep"), []byte(tc.src), tc.opt)
			if !errors.Is(err, errInvalid) {
				t.Fatalf("err = %v, want errInvalid (output %s)", err, got)
			}
			if string(got) != "keep" || meta != (Meta{}) {
				t.Errorf("on error got %q, %+v; want dst unchanged, zero Meta", got, meta)
			}
		})
	}
}

// TestRewriteTruncated cuts every golden body at every offset: each prefix
// is invalid (never a panic, never a partial body).
func TestRewriteTruncated(t *testing.T) {
	for _, g := range goldens {
		src := bytes.TrimRight(readFile(t, g.name+".b.json"), " \n")
		for n := range len(src) {
			if _, _, err := Rewrite(nil, src[:n], g.opt); !errors.Is(err, errInvalid) {
				t.Fatalf("%s cut at %d: err = %v, want errInvalid", g.name, n, err)
			}
		}
	}
}

func TestRewriteUnknownShape(t *testing.T) {
	for _, s := range []Shape{0, WalletAddress + 1} {
		_, _, err := Rewrite(nil, []byte(b(`null`)), Options{Shape: s})
		if err == nil || errors.Is(err, errInvalid) {
			t.Errorf("shape %v: err = %v, want a non-errInvalid error", s, err)
		}
	}
}

func TestRewriteFailure(t *testing.T) {
	tests := []struct {
		name, src     string
		code, message string
	}{
		{"B 400", `{"success":false,"code":"400","message":"Invalid address format","data":null}`, "400", "Invalid address format"},
		{"B 429 keys reordered", `{"data":null,"message":"Too many requests. Please slow down.","code":"429","success":false}`, "429", "Too many requests. Please slow down."},
		{"B without code", `{"success":false,"message":"boom"}`, "", "boom"},
		{"B escaped message", `{"success":false,"code":"401","message":"Missing or invalid \"API\" key\u0021"}`, "401", `Missing or invalid "API" key!`},
		{"B null message", `{"success":false,"code":"500","message":null,"data":null}`, "500", ""},
		{"A", `{"message":"Invalid txHash format","status_code":"0","data":null}`, "0", "Invalid txHash format"},
		{"A data ignored", `{"status_code":"0","data":{"x":1}}`, "0", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, shape := range []Shape{OrderBook, Activity, Transaction, WalletAddress} {
				_, _, err := Rewrite(nil, []byte(tc.src), Options{Shape: shape})
				fe, isFailure := errors.AsType[*FailureError](err)
				if !isFailure || fe.Code != tc.code || fe.Message != tc.message {
					t.Fatalf("%v: err = %v, want FailureError{%q, %q}", shape, err, tc.code, tc.message)
				}
			}
			code, message, isFailure := Failure([]byte(tc.src))
			if !isFailure || code != tc.code || message != tc.message {
				t.Errorf("Failure = %q, %q, %v", code, message, isFailure)
			}
		})
	}
	for _, src := range []string{
		b(`null`),                             // success
		ok + `null}`,                          // A success
		`{"success":false,"code":"400"`,       // truncated
		`{"success":false,"code":400}`,        // code not a string
		`{"code":"400","message":"x"}`,        // neither success nor status_code
		`{"success":false,"data":[}`,          // invalid data
		`["success",false]`,                   // not an object
		`{"status_code":"0","success":false}`, // both variants
	} {
		if code, message, isFailure := Failure([]byte(src)); isFailure {
			t.Errorf("Failure(%s) = %q, %q, true; want false", src, code, message)
		}
	}
}

func TestFailureErrorMessage(t *testing.T) {
	err := error(&FailureError{Code: "429", Message: "Rate limit exceeded"})
	if got := err.Error(); !strings.Contains(got, "429") || !strings.Contains(got, "Rate limit exceeded") {
		t.Errorf("Error() = %q", got)
	}
}

func TestAppendError(t *testing.T) {
	tests := []struct{ message, want string }{
		{"Invalid address format", `{"message":"Invalid address format","status_code":"0","data":null}`},
		{"say \"hi\"\n\t<&>", `{"message":"say \"hi\"\n\t<&>","status_code":"0","data":null}`},
		{"bad \xff byte", `{"message":"bad ` + "\ufffd" + ` byte","status_code":"0","data":null}`},
		{"", `{"message":"","status_code":"0","data":null}`},
	}
	for _, tc := range tests {
		got := AppendError([]byte("x"), tc.message)
		if string(got) != "x"+tc.want {
			t.Errorf("AppendError(%q) = %s, want x%s", tc.message, got, tc.want)
		}
		code, message, isFailure := Failure(got[1:])
		if !isFailure || code != "0" || (message != tc.message && !strings.Contains(tc.message, "\xff")) {
			t.Errorf("Failure(AppendError(%q)) = %q, %q, %v", tc.message, code, message, isFailure)
		}
	}
}

func TestShapeString(t *testing.T) {
	for s, want := range map[Shape]string{OrderBook: "OrderBook", Positions: "Positions", WalletAddress: "WalletAddress", 0: "Shape(0)", 42: "Shape(42)"} {
		if got := s.String(); got != want {
			t.Errorf("Shape(%d).String() = %q, want %q", s, got, want)
		}
	}
}

// TestPutRewriterBoundsScratch: a pooled rewriter keeps no large scratch
// from an odd body (many members, many escaped names) nor any reference to
// the caller's bytes.
func TestPutRewriterBoundsScratch(t *testing.T) {
	src := []byte(b(`{"items":[` + manyMembers(2000, false) + `],"x\u0041":` + manyMembers(300, false) + `}`))
	r := getRewriter(Options{Shape: Activity}, nil)
	if _, err := r.envelope(src, true); err != nil {
		t.Fatal(err)
	}
	if cap(r.scan.names) < 2000 {
		t.Fatalf("scanner held %d names; the test body should need 2000", cap(r.scan.names))
	}
	putRewriter(r)
	if r.out != nil || r.scan.src != nil || cap(r.scan.names) != 0 || cap(r.scan.text) > maxScratch || cap(r.text) > maxScratch {
		t.Errorf("pooled rewriter keeps out %d, src %d, names %d, scan text %d, text %d bytes",
			cap(r.out), len(r.scan.src), cap(r.scan.names), cap(r.scan.text), cap(r.text))
	}
}
