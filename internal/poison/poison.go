// Package poison overwrites pooled memory as it goes back to its pool, in
// a test build. Memory that a pool hands out again must not be read by
// anything that outlived its last use: a string made over a pooled buffer
// with unsafe.String, a slice of it kept by a flight. Such a read is not a
// data race the race detector can see when the pool's next user comes
// later, and it usually reads the right bytes, until the buffer is reused.
//
// Built with -tags poison, Fill overwrites a buffer with Pattern when its
// owner gives it back, so that a string still pointing into it reads
// garbage at once and a test fails, as a sanitizer's freed-memory fill
// does. Without the tag On is false, Fill does nothing, and both compile
// away: the production build pays nothing.
//
// The edge's copies of what outlives a request are made in a few named
// places (proxy's exchange.detach, route.Request.Own, cache's own key).
// Under the tag, SkipCopies leaves those copies out, so that a test can
// show that the fill catches a missing one.
package poison

import "strings"

// Pattern is the byte Fill writes: not ASCII, so a key or a path made of
// it is plainly not one the edge made.
const Pattern = 0xA5

// Fill overwrites b with Pattern when built with the poison tag.
func Fill(b []byte) {
	if !On {
		return
	}
	for i := range b {
		b[i] = Pattern
	}
}

// Copy returns a copy of s that is s's own memory: what a named copy
// place hands to work that outlives the memory s points into. Under the
// poison tag with SkipCopies set it returns s itself, the copy left out.
func Copy(s string) string {
	if s == "" || Skipped() {
		return s
	}
	return strings.Clone(s)
}
