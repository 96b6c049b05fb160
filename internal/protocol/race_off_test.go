//go:build !race

package protocol

// raceEnabled: the race detector makes sync.Pool drop items at random.
const raceEnabled = false
