package main

import "syscall"

// groupAttr puts a child in a process group of its own, killed with the
// orchestrator if that dies first.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalGroup sends sig to the child's process group.
func (p *proc) signalGroup(sig syscall.Signal) { _ = syscall.Kill(-p.pid(), sig) }
