package main

import (
	"strings"
	"testing"
)

// The run's header names the scratch directory's file system by its
// magic number, and says why when it cannot.
func TestFSTypeNamesTheFileSystem(t *testing.T) {
	if got := fsType(t.TempDir() + "/missing"); !strings.HasPrefix(got, "unknown (") {
		t.Errorf("a missing directory: %q, want unknown with the reason", got)
	}
	// /proc is procfs, which fsType has no name for: its magic, in hex.
	if got := fsType("/proc"); got != "type 0x9fa0" {
		t.Errorf("/proc: %q, want its magic", got)
	}
}
