package fetcherr

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
		if got := CleanMessage(in); got != want {
			t.Errorf("CleanMessage(%q) = %q, want %q", in, got, want)
		}
	}
}
