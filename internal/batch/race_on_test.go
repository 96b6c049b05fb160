//go:build race

package batch

// raceEnabled: the race detector makes sync.Pool drop items at random.
const raceEnabled = true
