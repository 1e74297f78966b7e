package normalize_test

import (
	"errors"
	"fmt"

	"tradergate/normalize"
)

func ExampleRewrite() {
	// A page of activity as the legacy host sends it: variant B envelope,
	// prices in cents, fee as a JSON number.
	src := []byte(`{"success":true,"code":"0","message":"success","data":{"items":[` +
		`{"blockTimestamp":1731002000,"actionType":"Buy","price":"78.0","size":"125.4","fee":0.0125,"liquidityRole":"TAKER"},` +
		`{"blockTimestamp":1731000500,"actionType":"Redeem","price":"100","size":"50","fee":0,"liquidityRole":null}` +
		`],"nextCursor":"eyJ0cyI6MTczMTAwMDAwMH0="}}`)

	out, meta, err := normalize.Rewrite(nil, src, normalize.Options{
		Shape:      normalize.Activity,
		ShiftCents: true,
		TimeField:  "blockTimestamp",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(out))
	fmt.Printf("items=%d nextCursor=%v maxTime=%d\n", meta.Items, meta.NextCursor, meta.MaxTime)

	// A failure envelope is an error carrying the upstream's code and message.
	_, _, err = normalize.Rewrite(nil, []byte(`{"success":false,"code":"400","message":"Invalid address format","data":null}`),
		normalize.Options{Shape: normalize.Activity})
	if fe, ok := errors.AsType[*normalize.FailureError](err); ok {
		fmt.Println(fe.Code, fe.Message)
	}
	// Output:
	// {"message":"OK","status_code":"1","data":{"items":[{"blockTimestamp":1731002000,"actionType":"Buy","price":"0.78","size":"125.4","fee":"0.0125","liquidityRole":"TAKER"},{"blockTimestamp":1731000500,"actionType":"Redeem","price":"1","size":"50","fee":"0","liquidityRole":null}],"nextCursor":"eyJ0cyI6MTczMTAwMDAwMH0="}}
	// items=2 nextCursor=true maxTime=1731002000
	// 400 Invalid address format
}

func ExampleShiftCents() {
	for _, cents := range []string{"78.0", "5", "100", "-3.25", "1.5E-3"} {
		out, _ := normalize.ShiftCents(nil, []byte(cents))
		fmt.Printf("%s -> %s\n", cents, out)
	}
	// Output:
	// 78.0 -> 0.78
	// 5 -> 0.05
	// 100 -> 1
	// -3.25 -> -0.0325
	// 1.5E-3 -> 0.000015
}

func ExampleAppendError() {
	fmt.Println(string(normalize.AppendError(nil, `Invalid "txHash" format`)))
	// Output:
	// {"message":"Invalid \"txHash\" format","status_code":"0","data":null}
}
