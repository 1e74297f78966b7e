package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// procs owns every child process of a run: each runs in its own process
// group (so that a server's workers, like nginx's, go with it), pinned
// with taskset, with its output kept under the log directory. stopAll runs
// on every way out of the run, Ctrl-C included; Pdeathsig covers the
// orchestrator being killed outright.
type procs struct {
	logDir string
	tmpDir string // raw stderr of filtered processes, until they exit
	// nice, when not zero, runs every child under `nice -n`: a negative
	// value (root only) keeps other work on a shared machine from taking
	// the pinned CPUs' time.
	nice int
	mu   sync.Mutex
	tag  string // prefix of log names: the row being run
	seq  map[string]int
	live map[*proc]bool
}

// proc is one child process.
type proc struct {
	name    string
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has been reaped
	err     error         // Wait's error, set before done closes
	errPath string        // its stderr log
	outPath string        // its stdout log
	rawErr  string        // with startOpts.dropLines: the unfiltered stderr
	drop    []byte
	dropped atomic.Int64
	closers []io.Closer
}

func newProcs(logDir, tmpDir string, nice int) *procs {
	return &procs{logDir: logDir, tmpDir: tmpDir, nice: nice, seq: map[string]int{}, live: map[*proc]bool{}}
}

// setTag names the row whose processes start next, so that their logs
// read "<scenario>.<server>.stderr.log"; "" for processes of the whole run.
func (ps *procs) setTag(tag string) {
	ps.mu.Lock()
	ps.tag = tag
	ps.mu.Unlock()
}

// startOpts are the optional parts of a start.
type startOpts struct {
	env []string
	// dropLines, when set, keeps stderr lines containing it out of the log
	// (tradergate's access log); proc.droppedLines counts them. The process
	// writes to a plain file, filtered into the log when it exits: a pipe
	// read live would wake the orchestrator on every line and charge the
	// server for the wake-ups.
	dropLines string
	// cpuList, when set, is taskset's CPU list instead of cpu alone, and
	// GOMAXPROCS its count of CPUs (-fanout-server-cpus 2: "0,1").
	cpuList string
}

// start runs bin pinned to cpu (taskset -c), with GOMAXPROCS=1 so that a
// Go server uses the one core it has, in a new process group. A name used
// again gets a numbered log file.
func (ps *procs) start(name string, cpu int, o startOpts, bin string, args ...string) (*proc, error) {
	ps.mu.Lock()
	if ps.tag != "" {
		name = ps.tag + "." + name
	}
	ps.seq[name]++
	n := ps.seq[name]
	ps.mu.Unlock()
	base := name
	if n > 1 {
		base = fmt.Sprintf("%s.%d", name, n)
	}
	p := &proc{name: name, done: make(chan struct{}), errPath: filepath.Join(ps.logDir, base+".stderr.log"),
		outPath: filepath.Join(ps.logDir, base+".stdout.log")}
	stdout, err := os.Create(p.outPath)
	if err != nil {
		return nil, err
	}
	errFile := p.errPath
	if o.dropLines != "" {
		p.rawErr, p.drop = filepath.Join(ps.tmpDir, base+".stderr.raw"), []byte(o.dropLines)
		errFile = p.rawErr
	}
	stderrFile, err := os.Create(errFile)
	if err != nil {
		stdout.Close()
		return nil, err
	}
	p.closers = []io.Closer{stdout, stderrFile}
	cpus, procs := strconv.Itoa(cpu), "GOMAXPROCS=1"
	if o.cpuList != "" {
		cpus, procs = o.cpuList, "GOMAXPROCS="+strconv.Itoa(len(strings.Split(o.cpuList, ",")))
	}
	argv := append([]string{"taskset", "-c", cpus, bin}, args...)
	if ps.nice != 0 {
		argv = append([]string{"nice", "-n", strconv.Itoa(ps.nice)}, argv...)
	}
	// nice and taskset exec the command in place: the pid is the server's.
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), procs), o.env...)
	cmd.Stdout = stdout
	cmd.Stderr = stderrFile
	cmd.SysProcAttr = groupAttr()
	if err := cmd.Start(); err != nil {
		p.closeFiles()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p.cmd = cmd
	ps.mu.Lock()
	ps.live[p] = true
	ps.mu.Unlock()
	go func() {
		p.err = cmd.Wait()
		p.closeFiles()
		ps.mu.Lock()
		delete(ps.live, p)
		ps.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) closeFiles() {
	for _, c := range p.closers {
		_ = c.Close()
	}
	if p.rawErr != "" {
		if n, err := filterFile(p.rawErr, p.errPath, p.drop); err == nil {
			p.dropped.Store(n)
			_ = os.Remove(p.rawErr)
		}
	}
	// Most servers print nothing; empty logs would only hide the others.
	for _, path := range []string{p.outPath, p.errPath} {
		if fi, err := os.Stat(path); err == nil && fi.Size() == 0 {
			_ = os.Remove(path)
		}
	}
}

// droppedLines counts the stderr lines kept out of the log.
// It is known once the process has exited.
func (p *proc) droppedLines() int64 { return p.dropped.Load() }

// pid is the process's id, which is also its process group's: nice and
// taskset exec the command in place.
func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, waits up to grace, then kills
// the group. It is safe to call more than once.
func (p *proc) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	p.signalGroup(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.signalGroup(syscall.SIGKILL)
		<-p.done
	}
	// Leftovers of the group (a worker that outlived its master).
	p.signalGroup(syscall.SIGKILL)
}

// stopAll stops every live child.
func (ps *procs) stopAll() {
	ps.mu.Lock()
	list := make([]*proc, 0, len(ps.live))
	for p := range ps.live {
		list = append(list, p)
	}
	ps.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range list {
		wg.Go(func() { p.stop(3 * time.Second) })
	}
	wg.Wait()
}

// stderrTail returns the end of a process's stderr log, for error reports.
func (p *proc) stderrTail(n int) string {
	data, _ := os.ReadFile(p.errPath)
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return string(bytes.TrimSpace(data))
}

// errExited: the process ended while it was expected to serve.
var errExited = errors.New("process exited")

// waitPort polls addr until it accepts a connection, the process exits or
// the timeout passes.
func waitPort(ctx context.Context, p *proc, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s: %w (%v)", p.name, errExited, p.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %s not listening after %v", p.name, addr, timeout)
		}
	}
}

// freePort asks the kernel for a free loopback port. The port is released
// before the server binds it; on a machine not busy opening ports that is
// a safe window.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// freeAddr is a free port of the loopback address, as host:port, for a
// server that is only told where to listen.
func freeAddr() (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	return "127.0.0.1:" + strconv.Itoa(port), nil
}
