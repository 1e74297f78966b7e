//go:build !poison

package poison

// On is false: Fill does nothing and every copy is made.
const On = false

// Skipped is false: every copy is made.
func Skipped() bool { return false }
