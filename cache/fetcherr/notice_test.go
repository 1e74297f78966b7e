package fetcherr

import (
	"context"
	"errors"
	"testing"
	"time"

	"tradergate/limits"
)

// What a waiting replica decodes answers the client as the fetching
// replica's error would have, and serves stale in the same cases.
func TestFailureNoticeRoundTrip(t *testing.T) {
	for _, err := range []error{
		&Error{Reason: Timeout},
		&Error{Reason: Unavailable, RetryAfter: 3 * time.Second},
		&Error{Reason: RateLimited, RetryAfter: 2 * time.Second},
		&Error{Reason: Refused, Status: 404, Message: "no such \x00 wallet"},
		&limits.ShieldFullError{RetryAfter: time.Second},
		context.DeadlineExceeded,
	} {
		got := Decode(Encode(err))
		if Transient(got) != Transient(err) && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%v: transient %v after the trip, %v before", err, Transient(got), Transient(err))
		}
		var want, have *Error
		if errors.As(err, &want) {
			if !errors.As(got, &have) || have.Reason != want.Reason || have.Status != want.Status ||
				have.RetryAfter != want.RetryAfter || have.Message != CleanMessage(want.Message) {
				t.Errorf("%v came back as %v", err, got)
			}
		}
	}
	// Anything else the holder met is the legacy host failing, as far as
	// its waiters know: a 502, and stale may answer it.
	if e, ok := Decode(Encode(errors.New("anything else"))).(*Error); !ok || e.Reason != Failed {
		t.Errorf("another error came back as %v", e)
	}
	if e, ok := Decode([]byte("garbage")).(*Error); !ok || e.Reason != Failed {
		t.Errorf("an unreadable notice: %v", Decode([]byte("garbage")))
	}
}
