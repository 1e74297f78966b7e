//go:build poison

package poison

import "sync/atomic"

// On: pooled buffers are overwritten as they go back to their pools.
const On = true

var skip atomic.Bool

// SkipCopies makes the named copy places leave their copies out, until
// called with false: for a test that shows a missing copy is caught.
func SkipCopies(b bool) { skip.Store(b) }

// Skipped reports whether the named copy places leave their copies out.
func Skipped() bool { return skip.Load() }
