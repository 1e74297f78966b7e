package normalize

import (
	"errors"
	"strings"
	"testing"
)

func TestShiftCents(t *testing.T) {
	long := strings.Repeat("1234567890", 20) // 200 digits
	tests := []struct{ in, want string }{
		{"78.0", "0.78"},
		{"78.5", "0.785"},
		{"0", "0"},
		{"0.5", "0.005"},
		{"100", "1"},
		{"5", "0.05"},
		{"-3.25", "-0.0325"},
		{"-0", "0"},
		{"-0.000", "0"},
		{"007", "0.07"},
		{"0.000001", "0.00000001"},
		{"1000", "10"},
		{"1200.50", "12.005"},
		{"99.99", "0.9999"},
		{"10", "0.1"},
		{"1e2", "1"},
		{"1E2", "1"},
		{"1e+2", "1"},
		{"1.5E-3", "0.000015"},
		{"-2e+1", "-0.2"},
		{"0e5", "0"},
		{"25e0", "0.25"},
		{"1e1000", "1" + strings.Repeat("0", 998)},
		{"1e-1000", "0." + strings.Repeat("0", 1001) + "1"},
		{long, long[:198] + ".9"}, // "...7890" / 100: the trailing zero goes
		{"0." + long, "0.00" + strings.TrimRight(long, "0")},
		{long + "." + long, long[:198] + "." + long[198:] + strings.TrimRight(long, "0")},
	}
	for _, tc := range tests {
		got, err := ShiftCents([]byte("x"), []byte(tc.in))
		if err != nil || string(got) != "x"+tc.want {
			t.Errorf("ShiftCents(%s) = %s, %v; want x%s", tc.in, got, err, tc.want)
		}
	}
}

func TestShiftCentsRejects(t *testing.T) {
	for _, in := range []string{
		"", "+5", ".5", "5.", "-", "-.5", "abc", "1e", "1e+", "1e-", "e5", "0x10",
		" 5", "5 ", "1,5", "1_000", "NaN", "Infinity", "--1", "1.2.3", "1e2.5",
		"\u0661", "1e1001", "1e-1001", "1e999999999", "1e99999999999999999999",
	} {
		got, err := ShiftCents([]byte("x"), []byte(in))
		if !errors.Is(err, errInvalid) || string(got) != "x" {
			t.Errorf("ShiftCents(%q) = %q, %v; want dst unchanged and errInvalid", in, got, err)
		}
	}
}
