package h2edge

import (
	"sync/atomic"
	"time"
)

// A stream's handler, and a burst's write, run on goroutines the server
// keeps from one to the next (runners) rather than on a goroutine started
// for each. A new goroutine's stack starts small, and a handler's descent
// through the edge (the exchange, the cache, the answer's fields) and a
// write's through crypto/tls grow it by copying, more than once, on every
// request: at a fixed request rate that copying was a seventh of the
// edge's CPU on HTTP/2 (docs/BENCHMARKS.md, "Fixed rate: handlers on kept
// goroutines, raw socket calls"). A kept runner's stack has its size
// already.
//
// Runners number at most the handlers and writes under way at once; of
// those left idle after a burst, at most maxIdleRunners wait for the next
// job, each for runnerIdle at most, and none once the server has no
// connection left (so that a server with no connections keeps no
// goroutine).

// job is what a runner runs: a stream's handler (*Stream) or a
// connection's writes (*writer).
type job interface{ work() }

const (
	// runnerIdle is how long an idle runner waits for a job before it
	// ends.
	runnerIdle = 10 * time.Second
	// maxIdleRunners bounds the runners waiting at once, and so the
	// stacks kept after a burst of slow handlers (each perhaps 32 KiB).
	maxIdleRunners = 256
)

// runnerPool is the server's runners.
type runnerPool struct {
	jobs chan job // unbuffered: a send succeeds only to a waiting runner
	// stop is closed when the server's last connection ends (and a new
	// one made when the next begins): the waiting runners end.
	stop    atomic.Pointer[chan struct{}]
	idle    atomic.Int32 // runners waiting for a job
	running atomic.Int32 // runners, busy or waiting
}

// run hands j to a waiting runner, or to a new one when none waits.
func (p *runnerPool) run(j job) {
	select {
	case p.jobs <- j:
	default:
		p.running.Add(1)
		go p.runner(j)
	}
}

// runner runs j, then each job handed to it, until it has waited
// runnerIdle for one, the server's last connection ended, or enough
// runners wait already.
func (p *runnerPool) runner(j job) {
	defer p.running.Add(-1)
	var idle *time.Timer
	for {
		j.work()
		j = nil // nothing of a finished job stays reachable from here
		stop := p.stop.Load()
		if stop == nil {
			return
		}
		if p.idle.Add(1) > maxIdleRunners {
			p.idle.Add(-1)
			return
		}
		if idle == nil {
			idle = time.NewTimer(runnerIdle)
			defer idle.Stop()
		} else {
			idle.Reset(runnerIdle)
		}
		select {
		case j = <-p.jobs:
			p.idle.Add(-1)
		case <-idle.C:
			p.idle.Add(-1)
			return
		case <-*stop:
			p.idle.Add(-1)
			return
		}
	}
}

// open: the server has a connection again (under Server.mu).
func (p *runnerPool) open() {
	if p.jobs == nil {
		p.jobs = make(chan job)
	}
	if p.stop.Load() == nil {
		ch := make(chan struct{})
		p.stop.Store(&ch)
	}
}

// closeIdle: the server's last connection ended (under Server.mu); the
// runners waiting end, and those still busy end after their job.
func (p *runnerPool) closeIdle() {
	if ch := p.stop.Swap(nil); ch != nil {
		close(*ch)
	}
}

// Runners is how many goroutines the server keeps to run handlers and
// writes, busy or waiting for one.
func (s *Server) Runners() int { return int(s.runners.running.Load()) }

func (st *Stream) work() { st.c.run(st) }

func (w *writer) work() { w.run() }
