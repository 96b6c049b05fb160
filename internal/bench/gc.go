package bench

import (
	"os"
	"runtime/debug"
)

// LoadGeneratorGCPercent is the garbage collector's target (GOGC) of a
// process that generates load, unless GOGC is set. While a producer allocated
// a record and its callback for every record it sent, the collector took
// about a tenth of a load generator's CPU at Go's default of 100, and at 400
// the client's CPU per record was 0.71-0.76 µs against 0.87-0.88 µs, one
// producer of 1 KiB records (session 30). Since the records are recycled
// (sentRecord) the two targets measured alike for that producer (session 31);
// the readers and the e2e run's stamped values still allocate per record.
// docs/benchmarks.md has both.
const LoadGeneratorGCPercent = 400

// TuneGC gives this process LoadGeneratorGCPercent unless the GOGC
// environment variable sets the target.
func TuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(LoadGeneratorGCPercent)
	}
}
