package upstream

import (
	"strings"
	"testing"
)

// A legacy message reaches a client without control characters, invalid
// UTF-8 or unbounded length.
func TestCleanMessage(t *testing.T) {
	for in, want := range map[string]string{
		"Invalid tokenId format":       "Invalid tokenId format",
		"bad\x1b[31m red\x07 \r\nline": "bad [31m red line",
		"  tabs\tand\x00nul  ":         "tabs and nul",
		"bad utf8 \xff\xfe here":       "bad utf8 here",
		"":                             "",
		strings.Repeat("é", 150):       strings.Repeat("é", 100),
		"C1\u0085control":              "C1 control",
		"no\u2028separator\u00a0nbsp":  "no separator nbsp",
	} {
		if got := cleanMessage(in); got != want {
			t.Errorf("cleanMessage(%q) = %q, want %q", in, got, want)
		}
	}
	if e := mapStatus(400, "x\x00y", 0); e.Message != "x y" {
		t.Errorf("mapStatus kept %q", e.Message)
	}
	if e := mapStatus(404, "\x00\x01", 0); e.Message != "Not Found" {
		t.Errorf("an empty message after cleaning: %q", e.Message)
	}
}
