package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// build compiles tradergate (the working tree, unless -tradergate names a
// binary) and the helpers into the temp directory.
func (b *bench) build(ctx context.Context) error {
	b.bins = binaries{
		tradergate:  filepath.Join(b.tmp, "tradergate"),
		simserver:   filepath.Join(b.tmp, "simserver"),
		ceiling:     filepath.Join(b.tmp, "ceiling"),
		passthrough: filepath.Join(b.tmp, "passthrough"),
		loadgen:     filepath.Join(b.tmp, "loadgen"),
	}
	goBuild := func(args ...string) error {
		cmd := exec.CommandContext(ctx, "go", append([]string{"build"}, args...)...)
		cmd.Dir = b.root
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("go build %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if b.opt.tradergate != "" {
		abs, err := filepath.Abs(b.opt.tradergate)
		if err != nil {
			return err
		}
		b.bins.tradergate = abs
		b.note("tradergate binary given with -tradergate: " + abs)
	} else if err := goBuild("-o", b.bins.tradergate, "."); err != nil {
		return fmt.Errorf("%w\n(the working tree does not build; build tradergate elsewhere and pass -tradergate)", err)
	}
	return goBuild("-o", b.tmp+string(filepath.Separator), "./bench/cmd/simserver", "./bench/cmd/ceiling", "./bench/cmd/passthrough", "./bench/cmd/loadgen")
}

// moduleRoot is the directory of the go.mod in effect, so that the bench
// runs from anywhere inside the repository.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the tradergate module (run from the repository)")
	}
	return filepath.Dir(mod), nil
}

// lookPath is the path of an executable on PATH, "" when there is none.
func lookPath(name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		return ""
	}
	return p
}

// toolVersion returns the path of the peer or tool name on PATH and the
// first line it prints for args, less prefix; "" when it is not
// installed. The harness never installs one.
func toolVersion(name, prefix string, args ...string) (path, version string) {
	path = lookPath(name)
	if path == "" {
		return "", ""
	}
	out, _ := exec.Command(path, args...).CombinedOutput()
	first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return path, strings.TrimPrefix(first, prefix)
}
