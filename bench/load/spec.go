// Package load is the benchmark's load generator: a fixed number of
// keep-alive HTTP/1.1 connections on loopback, each sending its next
// request as soon as the last answer is read (closed loop), for a bounded
// time. It records latencies in a log-linear histogram and, at the edges of
// the measured window, the CPU counters of the server's CPU and process
// group and the upstream's request counter, so that every figure of a row
// covers the same interval.
package load

import (
	"errors"
	"fmt"
	"net"
	"time"

	"tradergate/bench/cpustat"
)

// Mode says how requests are chosen.
type Mode string

const (
	// ModeList sends URLs in turn, each connection starting at its own
	// offset.
	ModeList Mode = "list"
	// ModeZipf draws each request from URLs by Zipf rank: URLs[0] is the
	// most popular.
	ModeZipf Mode = "zipf"
	// ModeSequence makes every request a new target from Templates, so no
	// two requests share a cache key.
	ModeSequence Mode = "sequence"
	// ModeStampede runs Rounds rounds in which every connection sends
	// URLs[round] at the same moment.
	ModeStampede Mode = "stampede"
	// ModeH2load runs Command, an h2load timed run (-D with
	// --warm-up-time), and reads its figures off its output; the counters
	// are read when h2load says its warm-up and its main duration are
	// over (h2load.go).
	ModeH2load Mode = "h2load"
	// ModeIdle opens Connections TLS connections that each make one
	// request for URLs[0] and then idle, and reads the server's resident
	// memory before and Duration after (idle.go).
	ModeIdle Mode = "idle"
)

// Spec is one load run. The orchestrator writes it as JSON for the load
// generator process, which runs pinned to its own CPU.
type Spec struct {
	// Addr is the server, host:port on loopback.
	Addr string
	// Headers are sent on every request, as "Name: value".
	Headers []string
	Mode    Mode
	// URLs are request targets (path and query) for ModeList, ModeZipf and
	// ModeStampede (one per round).
	URLs []string
	// ZipfS is the Zipf exponent of ModeZipf; zero: 1.
	ZipfS float64
	// Seed makes ModeZipf draws repeatable.
	Seed uint64
	// Templates are the targets of ModeSequence, each with one "{n}".
	// Request i uses Templates[i%len] with {n} = SeqStart - i/len*SeqStep.
	Templates         []string
	SeqStart, SeqStep int64
	// SeqCount, when positive, bounds ModeSequence to that many requests:
	// every target is asked once, and the run ends when the last one is
	// answered, even before Warmup and Duration have passed.
	SeqCount int64
	// Connections is the number of keep-alive connections; zero: 32.
	Connections int
	// Warmup runs before the measured window, not counted.
	Warmup time.Duration
	// Duration is the measured window (not used by ModeStampede).
	Duration time.Duration
	// Rounds of ModeStampede; zero: len(URLs).
	Rounds int
	// CheckCache, when set, is the X-Cache value every sampled answer must
	// carry (tradergate's hit scenarios: "HIT").
	CheckCache string
	// SampleCache makes X-Cache be read (and counted by value) even when
	// nothing is expected of it.
	SampleCache bool
	// SampleEvery reads X-Cache on one answer in this many; zero: 64.
	// ModeStampede reads every answer.
	SampleEvery int
	// ServerCPU and LoadCPU are read from /proc/stat at the window's edges;
	// negative: not read.
	ServerCPU, LoadCPU int
	// ServerPGID is the server's process group, whose CPU time is read from
	// /proc/<pid>/stat as a cross-check; zero: not read.
	ServerPGID int
	// StatsURL answers {"requests": n}, the upstream's count of requests
	// that reached it; "": not read.
	StatsURL string
	// MetricsURL is a Prometheus text endpoint of the server (tradergate's
	// admin /metrics), read at the window's edges for the unlabelled
	// series named in Metrics; "": not read.
	MetricsURL string
	Metrics    []string
	// Histograms are unlabelled histograms of MetricsURL whose buckets are
	// read at the window's edges (Result.Histograms): the Go runtime's
	// scheduling latencies and GC pauses.
	Histograms []string
	// Timeout bounds one request; zero: 10s.
	Timeout time.Duration
	// Rate, when positive, makes the run open loop (openloop.go):
	// requests are sent on a fixed schedule of Rate a second over the
	// Connections, and each answer is timed from when its request was
	// due. Zero: closed loop, each connection sending its next request
	// when the last answer is in.
	Rate float64
	// Streams bounds the requests in flight on one HTTP/2 connection
	// (TLS.HTTP2); zero: 10, as the h2load rows run.
	Streams int
	// KeepAnswers keeps every answer of the window, when it was due (in a
	// closed loop, sent) and how long it took (Result.Answers), to be laid
	// beside a runtime trace of the server. ModeList, ModeZipf and
	// ModeSequence over HTTP/1.1, and open-loop HTTP/2.
	KeepAnswers bool

	// TLS, when set, makes every connection a TLS 1.3 one (ModeList,
	// ModeSequence, ModeZipf).
	TLS *TLSSpec
	// Command is ModeH2load's argv, h2load first.
	Command []string
	// RedisAddr is a redis-server whose INFO commandstats are read at the
	// window's edges: the commands the server under test sent it; "": not
	// read.
	RedisAddr string
}

// TLSSpec is how the load generator's TLS connections are made. The
// client offers X25519 alone, as h2load (OpenSSL) picks it, so that a Go
// server does not negotiate a post-quantum hybrid another server cannot
// offer: every server pays for the same key exchange.
type TLSSpec struct {
	// CAFile is the PEM certificate the server presents (self-signed),
	// trusted as the only root; ServerName is checked against it.
	CAFile, ServerName string
	// NewConnection sends one request per connection (Connection: close):
	// a full handshake, or a resumed one with Resume, per request, whose
	// latency includes the handshake.
	NewConnection bool
	// Resume keeps the session tickets the servers send and offers them
	// (TLS 1.3 PSK with ECDHE), so that handshakes after the first resume.
	Resume bool
	// HTTP2 offers h2 alone by ALPN; else http/1.1 alone. ModeIdle's
	// connections idle after one request; a timed ModeList run sends its
	// requests as streams on kept connections (h2client.go), closed loop
	// or, with Rate, open loop.
	HTTP2 bool
}

func (s *Spec) applyDefaults() {
	if s.Connections <= 0 {
		s.Connections = 32
	}
	if s.SampleEvery <= 0 {
		s.SampleEvery = 64
	}
	if s.Timeout <= 0 {
		s.Timeout = 10 * time.Second
	}
	if s.ZipfS <= 0 {
		s.ZipfS = 1
	}
	if s.Streams <= 0 {
		s.Streams = 10
	}
	if s.Mode == ModeStampede && s.Rounds <= 0 {
		s.Rounds = len(s.URLs)
	}
}

// validate refuses specs that cannot run, and any address off loopback:
// the benchmark never sends load anywhere else.
func (s *Spec) validate() error {
	host, _, err := net.SplitHostPort(s.Addr)
	if err != nil {
		return fmt.Errorf("addr %q: %w", s.Addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("addr %q: only loopback addresses are allowed", s.Addr)
	}
	switch s.Mode {
	case ModeList, ModeZipf:
		if len(s.URLs) == 0 {
			return errors.New("no URLs")
		}
	case ModeStampede:
		if s.Rounds > len(s.URLs) {
			return fmt.Errorf("stampede: %d rounds but %d URLs (one cold URL per round)", s.Rounds, len(s.URLs))
		}
	case ModeSequence:
		if len(s.Templates) == 0 {
			return errors.New("sequence: no templates")
		}
	case ModeIdle:
		if len(s.URLs) == 0 || s.TLS == nil || s.ServerPGID <= 0 {
			return errors.New("idle: a URL, TLS and the server's process group are needed")
		}
	case ModeH2load:
		if len(s.Command) == 0 {
			return errors.New("h2load: no command")
		}
		if s.TLS != nil {
			return errors.New("h2load: TLS is set on its command line, not in TLS")
		}
	default:
		return fmt.Errorf("unknown mode %q", s.Mode)
	}
	if s.SeqCount < 0 || (s.SeqCount > 0 && s.Mode != ModeSequence) {
		return errors.New("SeqCount: a positive count of sequence requests, with ModeSequence only")
	}
	if s.TLS != nil && (s.Mode == ModeStampede || s.TLS.CAFile == "") {
		return errors.New("TLS: a CA file is needed, and the stampede runs plain HTTP only")
	}
	if s.TLS != nil && s.TLS.HTTP2 && s.Mode != ModeIdle && (s.Mode != ModeList || s.TLS.NewConnection) {
		return errors.New("TLS: HTTP2 is for ModeIdle and for ModeList on kept connections")
	}
	if s.Rate < 0 || (s.Rate > 0 && (s.Mode != ModeList || s.TLS != nil && s.TLS.NewConnection)) {
		return errors.New("rate: a positive Rate, with ModeList on kept connections only")
	}
	if s.TLS != nil && s.TLS.Resume && !s.TLS.NewConnection {
		return errors.New("TLS: Resume needs NewConnection (a kept connection resumes nothing)")
	}
	if s.Mode != ModeStampede && s.Duration <= 0 {
		return errors.New("duration must be positive")
	}
	return nil
}

// Result is what one run measured; every count covers the measured window.
type Result struct {
	Requests        int64 // answers read in the window
	Errors          int64 // non-2xx answers plus transport errors
	TransportErrors int64 // failed dials, writes, reads, malformed answers
	// Status counts answers by status code.
	Status map[int]int64
	// Window is the measured time, RPS = Requests / Window.
	Window    time.Duration
	RPS       float64
	BodyBytes int64
	Latency   Latency
	// Cache counts sampled X-Cache values ("" when absent); CacheUnexpected
	// counts the samples that differed from Spec.CheckCache.
	Cache           map[string]int64
	CacheSampled    int64
	CacheUnexpected int64
	// ServerCPU and LoadCPU are the ticks of those CPUs in the window.
	ServerCPU, LoadCPU cpustat.CPUTimes
	CPUMeasured        bool
	// ServerProcJiffies is the server process group's user+system ticks.
	ServerProcJiffies uint64
	// ServerMinorFaults is the server process group's minor page faults:
	// memory it touched for the first time, which the kernel backed.
	ServerMinorFaults uint64
	ProcMeasured      bool
	// Upstream is how many requests reached the upstream in the window;
	// UpstreamPerRound splits it by stampede round.
	Upstream         int64
	UpstreamMeasured bool
	UpstreamPerRound []int64
	// ServerRSS and ServerPeakRSS are the server process group's resident
	// memory at the window's end (VmRSS and VmHWM of /proc/<pid>/status,
	// summed over the group), in bytes.
	ServerRSS, ServerPeakRSS uint64
	RSSMeasured              bool
	// IdleConns is how many connections of ModeIdle were open, each after
	// its answer, when ServerRSS was read; IdleRSSBefore is the server's
	// resident memory before the first one opened.
	IdleConns     int64
	IdleRSSBefore uint64
	// MetricsBefore and MetricsAfter are the values of Spec.Metrics at the
	// window's edges (a summary's or histogram's as name_sum and
	// name_count); a series the server does not export is absent.
	MetricsBefore, MetricsAfter map[string]float64
	// Histograms are the window's counts of Spec.Histograms, cumulative
	// by bucket as exposed; a histogram the server does not export is
	// absent.
	Histograms map[string][]Bucket `json:",omitempty"`
	// Protocol is the application protocol h2load negotiated (ModeH2load):
	// "h2" or "http/1.1".
	Protocol string
	// Handshakes counts the TLS handshakes completed in the window, and
	// Resumed those that resumed a session (Spec.TLS).
	Handshakes, Resumed int64
	// RedisCalls counts, by command (lower case), the calls Spec.RedisAddr
	// served in the window, the harness's own INFO left out.
	RedisCalls    map[string]int64
	RedisMeasured bool
	// Rate is an open-loop run's schedule, requests a second (Spec.Rate);
	// RPS is what was answered. Unsent counts the window's requests the
	// load generator had not sent when the drain after the window ended
	// (a server far behind its schedule). Lag is how late it sent
	// requests whose connection was free when they were due: its own
	// timing, which every server's latencies include alike.
	Rate   float64 `json:",omitempty"`
	Unsent int64   `json:",omitempty"`
	Lag    Latency
	// Served is an open-loop run's Latency with the load generator's own
	// lateness taken out of each answer (servedLatency): what the server
	// and the wait for a busy connection made. Zero in a closed loop.
	Served Latency
	// WindowStart is when the measured window opened; Answers, with
	// Spec.KeepAnswers, are every answer of the window, in microseconds:
	// when its request was due after WindowStart, its latency, how long
	// after it was due it was sent, and how much of that it waited for
	// its connection (openAnswer).
	WindowStart time.Time
	Answers     [][4]int64 `json:",omitempty"`
	// Problems are measurement failures worth showing (a counter that
	// could not be read), not server errors.
	Problems []string
}

// Latency summarises the histogram of a run.
type Latency struct {
	P50, P90, P99, P999, Max, Mean time.Duration
}

func summarize(h *Histogram) Latency {
	return Latency{
		P50: h.Percentile(50), P90: h.Percentile(90), P99: h.Percentile(99), P999: h.Percentile(99.9),
		Max: h.Max(), Mean: h.Mean(),
	}
}
