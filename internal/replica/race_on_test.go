//go:build race

package replica

// raceEnabled: the race detector makes sync.Pool drop items at random.
const raceEnabled = true
