package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"tradergate/limits"
	"tradergate/proxy/route"
	"tradergate/proxy/upstream"
	"tradergate/proxy/wire"
)

// README's "Errors" section is a copy of the error table; this keeps the
// copy true. On a mismatch it prints the table to paste.
func TestREADMEErrorTable(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	want := errorTableMarkdown()
	if !strings.Contains(string(readme), want) {
		t.Errorf("README.md's \"Errors\" table differs from the error table in proxy/errors.go; it should read:\n%s", want)
	}
}

// errorTableMarkdown renders the table as README's "Errors" section has it.
func errorTableMarkdown() string {
	b := []byte("| Status | When | Message | Headers |\n|---|---|---|---|\n")
	for k := failure(1); k < numFailures; k++ {
		r := errorTable[k]
		status := strconv.Itoa(r.status)
		if r.status == 0 {
			status = "4xx"
		}
		msg := "`" + r.message + "`"
		if r.message == "" {
			msg = r.about
		}
		if b := legacyMessages[k]; b != "" {
			msg += " (legacy paths: `" + b + "`)"
		}
		b = append(b, "| "+status+" | "+r.when+" | "+msg+" | "+r.headers+" |\n"...)
	}
	return string(b)
}

func TestEveryFailureHasARow(t *testing.T) {
	for k := failure(1); k < numFailures; k++ {
		r := errorTable[k]
		if r.when == "" || (r.status == 0) != (k == failUpstreamRefused) || (r.message == "") == (r.about == "") {
			t.Errorf("row %d is incomplete: %+v", k, r)
		}
	}
}

func TestAsError(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		msg    string
		retry  time.Duration
	}{
		{"contract rule", &route.Error{Message: "Invalid limit: x"}, 400, "Invalid limit: x", 0},
		{"legacy refusal", &upstream.Error{Reason: upstream.Refused, Status: 404, Message: "no such wallet"}, 404, "no such wallet", 0},
		{"legacy timeout", &upstream.Error{Reason: upstream.Timeout}, 504, "Upstream timeout", 0},
		{"legacy down", &upstream.Error{Reason: upstream.Unreachable}, 502, "Upstream unreachable", 0},
		{"legacy 5xx", &upstream.Error{Reason: upstream.Failed}, 502, "Upstream error", 0},
		{"legacy garbage", &upstream.Error{Reason: upstream.Invalid}, 502, "Invalid upstream response", 0},
		{"legacy too large", &upstream.Error{Reason: upstream.TooLarge}, 502, "Upstream response too large", 0},
		{"our key refused", &upstream.Error{Reason: upstream.Credential}, 502, "Upstream rejected the gateway's credential", 0},
		{"legacy 429", &upstream.Error{Reason: upstream.RateLimited, RetryAfter: 3 * time.Second}, 503, "Upstream rate limited", 3 * time.Second},
		{"breaker open", &upstream.Error{Reason: upstream.Unavailable, RetryAfter: time.Second}, 503, "Upstream unavailable", time.Second},
		{"shield full", &limits.ShieldFullError{RetryAfter: time.Second}, 503, "Upstream busy", time.Second},
		{"deadline", context.DeadlineExceeded, 504, "Upstream timeout", 0},
		{"client gone", context.Canceled, wire.StatusClientClosed, "Client closed request", 0},
		{"a joined flight's leader stopped with the edge", fmt.Errorf("cache: the flight's leader stopped: %w", wire.ErrShuttingDown), 503, "Server shutting down", time.Second},
		{"anything else", errors.New("bug"), http.StatusInternalServerError, "Internal server error", 0},
		{"wrapped", errors.Join(errors.New("ctx"), &route.Error{Message: "m"}), 400, "m", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := asError(tc.err)
			if e.Status() != tc.status || e.Message() != tc.msg || e.RetryAfter != tc.retry {
				t.Errorf("asError(%v) = %d %q retry %v; want %d %q retry %v", tc.err, e.Status(), e.Message(), e.RetryAfter, tc.status, tc.msg, tc.retry)
			}
		})
	}
}
