//go:build !race

package history

// raceEnabled: the run is built with the race detector.
const raceEnabled = false
