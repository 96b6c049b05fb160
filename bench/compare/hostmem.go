package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Free page reporting. A VM whose kernel reports free memory to its host
// (virtio-balloon; the machine docs/benchmarks.md measures on does) has those
// pages taken back: the next write to one faults on the host first. Writing a
// file into the page cache on such memory took 1.1-1.5 s of CPU per GB there,
// against 0.17-0.20 s on memory freed a moment before and not reported yet
// (session 30). A broker whose writes take fresh memory for its page cache, as
// Kafka's do, then runs at a speed that depends on what freed memory before
// its run and when, so the report says when the machine reports, and how much
// it reported during each system's runs.

// reportedKiBPath is the kernel's count of KiB it has reported to the host.
var reportedKiBPath = "/sys/module/page_reporting/parameters/reported_kib"

// hostReportedKiB is how much free memory the kernel has reported to its host
// so far; ok is false where the kernel does not report.
func hostReportedKiB() (kib int64, ok bool) {
	data, err := os.ReadFile(reportedKiBPath)
	if err != nil {
		return 0, false
	}
	kib, err = strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return kib, err == nil
}

// writeHostReporting notes, when the machine reports free memory to its host,
// what that does to the figures and how much each system's runs saw reported.
func (r *report) writeHostReporting(w io.Writer) {
	if !r.Machine.PageReporting {
		return
	}
	reported := map[string]int64{}
	for _, p := range r.Pairings {
		for _, s := range p.Samples {
			reported[s.System] += s.HostReportedKiB
		}
	}
	fmt.Fprintf(w, "This machine reports free memory to its host (free page reporting): a page "+
		"written after that faults on the host first, so a broker that writes into fresh page "+
		"cache memory, as Kafka does, pays 1.1-1.5 s of CPU per GB for its page cache writes "+
		"there against 0.17-0.20 s on memory freed a moment before (docs/benchmarks.md, session 30). Reported during the measured "+
		"runs: %d MiB in Strata's, %d MiB in Kafka's.\n\n", reported["strata"]>>10, reported["kafka"]>>10)
}
