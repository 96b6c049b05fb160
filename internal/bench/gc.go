package bench

import (
	"os"
	"runtime/debug"
)

// LoadGeneratorGCPercent is the garbage collector's target (GOGC) of a
// process that generates load, unless GOGC is set. A producer allocates a
// record and its callback for every record it sends, and at Go's default of
// 100 the collector took about a tenth of a load generator's CPU (its mark
// and allocation in profiles of `strata bench produce`); at 400 the client's
// CPU per record was 0.71-0.76 µs against 0.87-0.88 µs at 100, one producer
// of 1 KiB records (docs/benchmarks.md, session 30), for a heap a few times
// the records in flight.
const LoadGeneratorGCPercent = 400

// TuneGC gives this process LoadGeneratorGCPercent unless the GOGC
// environment variable sets the target.
func TuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(LoadGeneratorGCPercent)
	}
}
