//go:build !unix

package freeport

// reserve cannot coordinate processes here; the probe alone decides.
func reserve(int) bool { return true }
