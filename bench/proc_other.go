//go:build !linux

package main

import (
	"errors"
	"syscall"
)

// The benchmark runs on Linux only (checkMachine refuses to start
// elsewhere); these let its package build, and its tests run, on the
// machines developers use.

func groupAttr() *syscall.SysProcAttr { return nil }

func (p *proc) signalGroup(syscall.Signal) { _ = p.cmd.Process.Kill() }

func raiseFileLimit() (uint64, error) { return 0, errors.ErrUnsupported }

func fsType(string) string { return "unknown" }
