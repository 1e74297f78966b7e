package native_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"tradergate/proxy/native"
)

func TestCompare(t *testing.T) {
	long := strings.Repeat("x", 500)
	tests := []struct {
		name           string
		legacy, native string
		want           []native.Difference
	}{
		{name: "equal", legacy: `{"a":"1","b":[1,2]}`, native: `{"a":"1","b":[1,2]}`},
		{name: "key order ignored", legacy: `{"a":"1","b":{"c":true,"d":null}}`, native: `{"b":{"d":null,"c":true},"a":"1"}`},
		{name: "whitespace ignored", legacy: `{"a": [ 1 , 2 ]}`, native: "{\n\"a\":[1,2]}\n"},
		{
			name:   "decimal string in one item",
			legacy: `{"data":{"items":[{"price":"0.78"},{"price":"0.5"}]}}`,
			native: `{"data":{"items":[{"price":"0.78"},{"price":"0.50"}]}}`,
			want:   []native.Difference{{Path: "data.items[].price", Legacy: `"0.5"`, Native: `"0.50"`}},
		},
		{
			name:   "numbers by their text",
			legacy: `{"n":1.0,"m":100000000000000000001}`, native: `{"n":1,"m":100000000000000000001}`,
			want: []native.Difference{{Path: "n", Legacy: "1.0", Native: "1"}},
		},
		{
			name:   "missing and extra fields",
			legacy: `{"a":"1","b":"2"}`, native: `{"a":"1","c":"3"}`,
			want: []native.Difference{
				{Path: "b", Legacy: `"2"`, Native: native.Absent},
				{Path: "c", Legacy: native.Absent, Native: `"3"`},
			},
		},
		{
			name:   "extra item",
			legacy: `{"items":[1]}`, native: `{"items":[1,{"k":"v"}]}`,
			want: []native.Difference{{Path: "items[]", Legacy: native.Absent, Native: `{"k":"v"}`}},
		},
		{
			name:   "type changed",
			legacy: `{"a":"1"}`, native: `{"a":1}`,
			want: []native.Difference{{Path: "a", Legacy: `"1"`, Native: "1"}},
		},
		{
			name:   "null against object",
			legacy: `{"data":null}`, native: `{"data":{}}`,
			want: []native.Difference{{Path: "data", Legacy: "null", Native: "{}"}},
		},
		{
			name:   "whole answer",
			legacy: `[]`, native: `{}`,
			want: []native.Difference{{Path: "$", Legacy: "[]", Native: "{}"}},
		},
		{
			name:   "values cut to 200 bytes",
			legacy: `{"a":"` + long + `"}`, native: `{"a":"y"}`,
			want: []native.Difference{{Path: "a", Legacy: `"` + long[:199], Native: `"y"`}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := native.Compare([]byte(tc.legacy), []byte(tc.native))
			if err != nil {
				t.Fatal(err)
			}
			if c.Count != len(tc.want) || !slices.Equal(c.Kept, tc.want) {
				t.Errorf("got %d %+v\nwant %+v", c.Count, c.Kept, tc.want)
			}
			for _, d := range tc.want {
				if c.ByPath[d.Path] == 0 {
					t.Errorf("ByPath lacks %q: %v", d.Path, c.ByPath)
				}
			}
		})
	}
}

func TestCompareCountsEveryDifferenceByPath(t *testing.T) {
	var a, b strings.Builder
	a.WriteString(`{"items":[`)
	b.WriteString(`{"items":[`)
	for i := range 100 {
		if i > 0 {
			a.WriteByte(',')
			b.WriteByte(',')
		}
		a.WriteString(`{"p":"1"}`)
		b.WriteString(`{"p":"2"}`)
	}
	a.WriteString("]}")
	b.WriteString("]}")
	c, err := native.Compare([]byte(a.String()), []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if c.Count != 100 || c.ByPath["items[].p"] != 100 || len(c.Kept) >= 100 {
		t.Errorf("count %d, by path %v, kept %d: want 100, 100 and fewer kept", c.Count, c.ByPath, len(c.Kept))
	}
}

func TestCompareRefusesWhatIsNotOneJSONValue(t *testing.T) {
	for _, tc := range []struct{ name, legacy, native, want string }{
		{"legacy broken", `{"a":`, `{}`, "legacy answer"},
		{"native broken", `{}`, `{"a"}`, "native answer"},
		{"native trailing", `{}`, `{} {}`, "native answer: data after the JSON value"},
		{"native empty", `{}`, ``, "native answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := native.Compare([]byte(tc.legacy), []byte(tc.native))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// FuzzCompare: any two inputs give an answer or an error, never a panic;
// a value compared with itself has no difference; the count is the same
// both ways round and every kept value is at most 200 bytes.
func FuzzCompare(f *testing.F) {
	f.Add([]byte(`{"a":[1,{"b":"x"}]}`), []byte(`{"a":[1,{"b":"y"}],"c":null}`))
	f.Add([]byte(`[]`), []byte(`"\u00e9"`))
	f.Add([]byte(`{"a":1e400}`), []byte(`{"a":-0}`))
	f.Add([]byte(`{"a":"`+strings.Repeat("é", 150)+`"}`), []byte(`{}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		c, err := native.Compare(a, b)
		if err != nil {
			return
		}
		back, err := native.Compare(b, a)
		if err != nil {
			t.Fatalf("compared one way but not the other: %v", err)
		}
		if back.Count != c.Count {
			t.Errorf("%d differences one way, %d the other", c.Count, back.Count)
		}
		for _, d := range c.Kept {
			if len(d.Legacy) > 200 || len(d.Native) > 200 {
				t.Errorf("value over 200 bytes at %s", d.Path)
			}
		}
		if json.Valid(a) {
			if same, err := native.Compare(a, a); err != nil || same.Count != 0 {
				t.Errorf("a value against itself: %d differences, %v", same.Count, err)
			}
		}
	})
}
