package main

import (
	"strconv"
	"time"
)

// h2loadVersion returns the h2load on PATH and its version.
func h2loadVersion() (path, version string) {
	return toolVersion("h2load", "h2load ", "--version")
}

// h2loadStreams are the concurrent requests per HTTP/2 connection; an
// HTTPS/1.1 connection has one at a time, as the plain rows' connections
// do (h2load's -m would pipeline them).
const h2loadStreams = 10

// h2loadCommand is h2load's argv for a timed TLS row: conns connections
// to url, the warm-up then the window (h2load reports the window alone),
// every header sent. An identity row sends Accept-Encoding: identity,
// since h2load asks for gzip by default.
func h2loadCommand(bin string, p proto, url string, headers []string, gzip bool, conns int, warmup, window time.Duration) []string {
	streams := h2loadStreams
	if p == protoH1TLS {
		streams = 1
	}
	args := []string{bin, "-c", strconv.Itoa(conns), "-m", strconv.Itoa(streams),
		"-D", durationArg(window), "--warm-up-time", durationArg(warmup)}
	if p == protoH1TLS {
		args = append(args, "--h1")
	}
	for _, h := range headers {
		args = append(args, "-H", h)
	}
	if !gzip {
		args = append(args, "-H", "Accept-Encoding: identity")
	}
	return append(args, url)
}

// durationArg writes d in whole milliseconds, as h2load reads durations;
// at least 1ms, since h2load refuses 0 for a warm-up.
func durationArg(d time.Duration) string {
	return strconv.FormatInt(max(d.Milliseconds(), 1), 10) + "ms"
}
