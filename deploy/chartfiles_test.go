package deploy

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestChartFilesAreCopies: the chart's rules and dashboard are the files
// the rest of deploy/ tests, byte for byte (go generate ./deploy copies
// them; deploy.go).
func TestChartFilesAreCopies(t *testing.T) {
	for copyOf, want := range map[string][]byte{"alerts.yml": Rules(), "tradergate.json": Dashboard()} {
		p := filepath.Join(chartDir, "files", copyOf)
		if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s: want a regular file (a link makes Helm warn on every command): %v", p, err)
			continue
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from its original: run go generate ./deploy", p)
		}
	}
}
