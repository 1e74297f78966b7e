// Package browsertest runs a real headless Chromium for tests of pages the
// edge serves (the status page), through chromedp, and keeps what they
// capture as artifacts.
package browsertest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"tradergate/internal/testkit"
)

// Chromium finds the browser, or ends the test: skipped, or failed when CI
// is set (CI installs it, so a missing browser must not pass silently).
func Chromium(t *testing.T) string {
	t.Helper()
	return testkit.Binary(t, "chromium", "chromium", "chromium-browser")
}

// Browser starts a headless Chromium for the test and returns a context to
// run actions in. Cleanup closes the browser and waits for it to exit.
func Browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(Chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	ctx, cancelTime := context.WithTimeout(context.Background(), 90*time.Second)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
		cancelTime()
	})
	return bctx
}

// SaveArtifact writes b under the test's temp dir and, when
// TRADERGATE_ARTIFACTS names a directory, there too.
func SaveArtifact(t *testing.T, name string, b []byte) {
	t.Helper()
	dirs := []string{t.TempDir()}
	if d := os.Getenv("TRADERGATE_ARTIFACTS"); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(d, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("saved %s", p)
	}
}

// Text is the text of the first element sel matches on the page ctx shows,
// trimmed, or ends the test.
func Text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("%s: %v", sel, err)
	}
	return strings.TrimSpace(v)
}
