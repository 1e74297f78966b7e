//go:build race

package proxy_test

// raceEnabled: the race detector keeps memory of its own for every
// synchronisation it sees, which grows with the run; resident memory is
// judged without it.
const raceEnabled = true
