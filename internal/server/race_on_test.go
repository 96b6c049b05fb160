//go:build race

package server

// raceEnabled: the race detector makes sync.Pool drop items at random.
const raceEnabled = true
