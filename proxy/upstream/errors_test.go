package upstream

import "testing"

// A legacy 4xx's message reaches a client cleaned (fetcherr.CleanMessage),
// and one that cleans to nothing is the status's text.
func TestMapStatusCleansTheMessage(t *testing.T) {
	if e := mapStatus(400, "x\x00y", 0); e.Message != "x y" {
		t.Errorf("mapStatus kept %q", e.Message)
	}
	if e := mapStatus(404, "\x00\x01", 0); e.Message != "Not Found" {
		t.Errorf("an empty message after cleaning: %q", e.Message)
	}
}
