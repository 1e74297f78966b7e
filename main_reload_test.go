//go:build unix

package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"tradergate/internal/testkit"
	"tradergate/proxy"
)

// TestSIGHUPReloadsConfig: a key added to config.yaml works after SIGHUP; a
// config that does not validate is refused with a line naming the field,
// and the running one stays.
func TestSIGHUPReloadsConfig(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "config.yaml")
	base := "upstream:\n  base_url: http://127.0.0.1:1/open-api\nplans:\n  pro: {requests: 1000, window: 1m}\n"
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(config, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(base)

	var logs testkit.LogBuffer
	m := &Main{ConfigPath: config, Demo: true, Listen: "127.0.0.1:0", AdminListen: "off", Stdout: io.Discard,
		Logger: slogTo(&logs), Getenv: func(string) string { return "" }}
	addr, _ := startMain(t, m, &logs)

	const newKey = "a-key-added-later"
	status := func(key string) int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/trader/wallet-address/"+m.demo.sim.Wallets()[0], nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	hup := func(wantLog string) {
		t.Helper()
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, wantLog+" in the logs after SIGHUP", func() bool { return strings.Contains(logs.String(), wantLog) })
	}
	if got := status(newKey); got != 401 {
		t.Fatalf("unknown key: %d", got)
	}

	write(base + "keys:\n  - id: later\n    sha256: " + proxy.HashKey(newKey) + "\n    plan: pro\n    routes: [wallet_address]\n")
	hup(`"msg":"config reloaded"`)
	if got := status(newKey); got != 200 {
		t.Errorf("key added by reload: %d", got)
	}
	if got := status(m.demo.clientKey); got != 200 {
		t.Errorf("the demo key after reload: %d", got)
	}

	write(base + "keys:\n  - id: broken\n    sha256: nothex\n    plan: pro\n    routes: [wallet_address]\n")
	hup("keys[0].sha256: must be 64 hex digits")
	if got := status(newKey); got != 200 {
		t.Errorf("after a refused reload the old keys must serve: %d", got)
	}
	if strings.Contains(logs.String(), newKey) || strings.Contains(logs.String(), m.demo.clientKey) {
		t.Error("a key appears in the logs")
	}
}
