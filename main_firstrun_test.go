package main

import (
	"bytes"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"tradergate/internal/testkit"
)

// ordered records what the demo writes to its two streams, in order.
type ordered struct {
	mu     sync.Mutex
	first  string // the stream written first
	stdout bytes.Buffer
	logs   bytes.Buffer
}

type stream struct {
	o    *ordered
	name string
}

func (s stream) Write(p []byte) (int, error) {
	s.o.mu.Lock()
	defer s.o.mu.Unlock()
	if s.o.first == "" {
		s.o.first = s.name
	}
	if s.name == "stdout" {
		return s.o.stdout.Write(p)
	}
	return s.o.logs.Write(p)
}

func (o *ordered) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.stdout.String() + o.logs.String()
}

// TestDemoFirstRun is a newcomer's first minute: the demo's banner comes
// before any log line, and README's curl lines are the ones it prints,
// with its placeholders for the values of the run.
func TestDemoFirstRun(t *testing.T) {
	o := &ordered{}
	m := &Main{Demo: true, Listen: "127.0.0.1:0", AdminListen: "off", Stdout: stream{o, "stdout"},
		LogOutput: stream{o, "log"}, Getenv: func(string) string { return "" }}
	addr, stop := startMain(t, m, &testkit.LogBuffer{})
	stop()
	o.mu.Lock()
	first, printed, logs := o.first, o.stdout.String(), o.logs.String()
	o.mu.Unlock()
	if first != "stdout" || logs == "" {
		t.Errorf("first written: %q, want the banner on stdout before the log lines (%d bytes of them)\n%s", first, len(logs), logs)
	}

	sim := m.demo.sim
	wallet := sim.Wallets()[0]
	var signer string
	for s, w := range sim.Signers() {
		if w == wallet {
			signer = s
		}
	}
	placeholders := strings.NewReplacer(
		m.demo.clientKey, "$KEY",
		"http://"+loopbackOnly(addr), "$E",
		wallet, "$W",
		url.QueryEscape(sim.Markets()[0].Tokens[0]), "<token>",
		sim.TradeTxs()[0], "<trade txHash>",
		sim.ComboTxs()[0], "<combo txHash>",
		signer, "<signer address>",
		"'", `"`,
	)
	var got []string
	for l := range strings.SplitSeq(printed, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "curl ") {
			got = append(got, placeholders.Replace(l))
		}
	}

	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "With the demo running")
	_, after, ok2 := strings.Cut(after, "```sh\n")
	block, _, ok3 := strings.Cut(after, "```")
	var want []string
	for l := range strings.SplitSeq(block, "\n") {
		if strings.HasPrefix(l, "curl ") {
			want = append(want, l)
		}
	}
	if !ok || !ok2 || !ok3 || len(want) == 0 {
		t.Fatal(`README.md has no curl block after "With the demo running"`)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("README.md's curl lines differ from the demo's; the demo prints (README's placeholders put in):\n%s\n\nREADME.md has:\n%s",
			strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestLogDurations: a duration in a log line reads as the configuration
// writes it.
func TestLogDurations(t *testing.T) {
	var b bytes.Buffer
	newLogger(&b, slog.LevelInfo).Info("slow", "timeout", 50*time.Millisecond, slog.Group("g", "wait", 2*time.Second))
	for _, want := range []string{`"timeout":"50ms"`, `"wait":"2s"`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("log line %s lacks %s", b.String(), want)
		}
	}
}
