package normalize

import (
	"errors"
	"testing"
)

func TestVerify(t *testing.T) {
	opt := Options{Shape: Activity, ShiftCents: true, TimeField: "blockTimestamp"}
	ok := `{"success":true,"code":"0","message":"success","data":{"items":[{"blockTimestamp":1700000000,"price":"78.0"}],"nextCursor":"abc"}}`
	out, meta, err := Verify(nil, []byte(ok), opt)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 0 || meta.Items != 1 || !meta.NextCursor || !meta.HasTime || meta.MaxTime != 1700000000 {
		t.Errorf("out %q meta %+v", out, meta)
	}
	for name, body := range map[string]string{
		"bad price":     `{"success":true,"code":"0","message":"success","data":{"items":[{"price":"x"}],"nextCursor":null}}`,
		"variant A":     `{"message":"OK","status_code":"1","data":{"items":[],"nextCursor":null}}`,
		"contradiction": `{"success":true,"code":"400","message":"x","data":null}`,
		"not json":      `{"success":true`,
	} {
		if _, _, err := Verify(out, []byte(body), opt); !errors.Is(err, errInvalid) {
			t.Errorf("%s: %v, want errInvalid", name, err)
		}
	}
	_, _, err = Verify(nil, []byte(`{"success":false,"code":"404","message":"gone","data":null}`), opt)
	var fe *FailureError
	if !errors.As(err, &fe) || fe.Code != "404" || fe.Message != "gone" {
		t.Errorf("failure envelope: %v", err)
	}
}

func TestAppendFailureB(t *testing.T) {
	got := string(AppendFailureB(nil, 429, "Too many requests. Please slow down."))
	want := `{"success":false,"code":"429","message":"Too many requests. Please slow down.","data":null}`
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
