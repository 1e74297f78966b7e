package wire

import (
	"context"
	"strings"
	"testing"
)

// The answer's fields keep one value per name, whatever names share a bit
// of Answer.named: a name set twice is replaced in place, one never set
// reads "", and a deleted one can be set again.
func TestHeaderFieldsByName(t *testing.T) {
	names := []string{"X-Request-Id", "X-Cache", "Cache-Status", "Age", "Cache-Control", "Vary", "Etag",
		"Content-Encoding", "Content-Type", "X-Content-Type-Options", "RateLimit", "RateLimit-Policy"}
	// Two more names sharing a bit with names above, found here so that
	// the test holds whatever nameBit's formula.
	for i := 0; len(names) < 14; i++ {
		n := "X-F" + strings.Repeat("f", i)
		for _, m := range names[:12] {
			if nameBit(n) == nameBit(m) && n != m {
				names = append(names, n)
				break
			}
		}
	}
	var x Answer
	x.Reset()
	for _, n := range names {
		x.SetHeader(n, "1 "+n)
	}
	for _, n := range names {
		x.SetHeader(n, "2 "+n)
	}
	if x.nh != len(names) {
		t.Fatalf("%d fields for %d names", x.nh, len(names))
	}
	for i, n := range names {
		if x.headers[i].Name != n || x.header(n) != "2 "+n {
			t.Errorf("field %d: %+v, header(%q) = %q", i, x.headers[i], n, x.header(n))
		}
	}
	if x.header("Retry-After") != "" {
		t.Error("a name never set has a value")
	}
	x.DelHeader(names[2])
	x.SetHeader(names[2], "3")
	if x.nh != len(names) || x.headers[x.nh-1] != (HeaderField{names[2], "3"}) {
		t.Errorf("deleted then set: %+v", x.headers[:x.nh])
	}
}

// header is the value of name on the answer, "" when it is not set.
func (x *Answer) header(name string) string {
	if x.named&nameBit(name) == 0 {
		return ""
	}
	for _, f := range x.headers[:x.nh] {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// Bearer reads the credential of the Bearer scheme whatever its case, and
// nothing else: another scheme, no credential, or one over MaxBearerLen.
func TestBearer(t *testing.T) {
	long := strings.Repeat("k", MaxBearerLen)
	for h, want := range map[string]string{
		"Bearer abc":           "abc",
		"bEARER  abc ":         "abc",
		"Bearer " + long:       long,
		"Bearer " + long + "k": "",
		"Bearer ":              "",
		"Bearer    ":           "",
		"Basic YWJjOmRlZg==":   "",
		"Bearerabc":            "",
		"":                     "",
	} {
		got, ok := Bearer(h)
		if got != want || ok != (want != "") {
			t.Errorf("Bearer(%.20q) = %.20q, %v; want %.20q", h, got, ok, want)
		}
	}
}

// A shared context is told from one that can end on its own: a value
// added under it keeps its end, a cancel or deadline of its own does not.
func TestShared(t *testing.T) {
	base, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	shared := Shared(base)
	type spanKey struct{}
	own, cancel := context.WithCancel(shared)
	defer cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"marked", shared, true},
		{"a value under it", context.WithValue(shared, spanKey{}, 1), true},
		{"a cancel of its own", own, false},
		{"a value under that", context.WithValue(own, spanKey{}, 1), false},
		{"not marked", base, false},
		{"the background, marked", Shared(context.Background()), true},
	} {
		if got := IsShared(tc.ctx); got != tc.want {
			t.Errorf("%s: IsShared %v, want %v", tc.name, got, tc.want)
		}
	}
}
