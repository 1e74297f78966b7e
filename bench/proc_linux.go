package main

import "syscall"

// groupAttr puts a child in a process group of its own, killed with the
// orchestrator if that dies first.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalGroup sends sig to the child's process group.
func (p *proc) signalGroup(sig syscall.Signal) { _ = syscall.Kill(-p.pid(), sig) }

// raiseFileLimit sets the soft limit on open files to the hard one and
// returns it. Set explicitly, it is what the children inherit: Go raises
// its own soft limit at start but gives children the one it found.
func raiseFileLimit() (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	l.Cur = l.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	return l.Cur, nil
}
