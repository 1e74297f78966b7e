package cpustat

import (
	"syscall"
	"testing"
)

const procStat = `cpu  198303 0 51874 269371 742 0 3731 0 0 0
cpu0 99372 1 24364 136418 110 2 1788 3 0 0
cpu1 98930 0 27509 132952 632 0 1942 0 0 0
intr 1 2 3
ctxt 42
`

func TestParseStat(t *testing.T) {
	got, err := ParseStat([]byte(procStat), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := CPUTimes{User: 99372, Nice: 1, System: 24364, Idle: 136418, IOWait: 110, IRQ: 2, SoftIRQ: 1788, Steal: 3}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if b := got.Busy(); b != 99372+1+24364+2+1788 {
		t.Errorf("busy %d", b)
	}
	if tot := got.Total(); tot != got.Busy()+136418+110+3 {
		t.Errorf("total %d", tot)
	}
	later := want
	later.User += 50
	later.Idle += 50
	if d := later.Sub(want); d.Busy() != 50 || d.Total() != 100 {
		t.Errorf("delta busy %d total %d", d.Busy(), d.Total())
	}
	// "cpu1" must not match the aggregate "cpu" line or "cpu10".
	c1, err := ParseStat([]byte(procStat), 1)
	if err != nil || c1.User != 98930 {
		t.Fatalf("cpu1: %+v %v", c1, err)
	}
	if _, err := ParseStat([]byte(procStat), 2); err == nil {
		t.Error("cpu2: want an error")
	}
	if _, err := ParseStat([]byte("cpu3 1 x 3 4\n"), 3); err == nil {
		t.Error("bad number: want an error")
	}
	old, err := ParseStat([]byte("cpu0 1 2 3 4\n"), 0) // old kernels: four columns
	if err != nil || old.Idle != 4 || old.IRQ != 0 {
		t.Fatalf("short line: %+v %v", old, err)
	}
}

func TestParseProcStat(t *testing.T) {
	// A command name with spaces and a parenthesis, as a process may set.
	line := "4242 (my (weird) srv) S 1 4240 4240 0 -1 4194560 1 0 0 0 1234 567 0 0 20 0 3 0 100 0 0"
	got, err := ParseProcStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if got != (ProcTimes{PGrp: 4240, UTime: 1234, STime: 567, MinFlt: 1}) {
		t.Fatalf("got %+v", got)
	}
	if _, err := ParseProcStat([]byte("4242 (x) S 1 2")); err == nil {
		t.Error("short line: want an error")
	}
}

func TestReadStatHere(t *testing.T) {
	if _, err := ReadStat(0); err != nil {
		t.Skip("no /proc/stat here:", err)
	}
	if hz, _ := ClockTicks(); hz <= 0 {
		t.Fatalf("USER_HZ %d", hz)
	}
}

func TestParseStatus(t *testing.T) {
	status := "Name:\ttradergate\nVmPeak:\t 2000000 kB\nVmHWM:\t  612000 kB\nVmRSS:\t  580004 kB\nThreads:\t7\n"
	m, err := ParseStatus([]byte(status))
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS != 580004<<10 || m.Peak != 612000<<10 {
		t.Fatalf("got %+v", m)
	}
	if m, err := ParseStatus([]byte("Name:\tkthreadd\nState:\tS\n")); err != nil || m != (Memory{}) {
		t.Fatalf("kernel thread: %+v %v", m, err)
	}
	if _, err := ParseStatus([]byte("VmRSS:\t12 MB\n")); err == nil {
		t.Fatal("a unit other than kB was accepted")
	}
}

func TestGroupMemorySelf(t *testing.T) {
	m, err := GroupMemory(syscall.Getpgrp())
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS == 0 || m.Peak < m.RSS {
		t.Fatalf("own group's memory %+v", m)
	}
}
