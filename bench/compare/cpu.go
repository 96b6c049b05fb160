package main

import (
	"fmt"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/strata-stream/strata/internal/bench"
)

// cpuSeconds sums the user and system CPU time of the broker processes so far.
func (s *system) cpuSeconds() (float64, error) {
	var total float64
	for _, pid := range s.pids() {
		sec, err := bench.ProcessCPU(pid)
		if err != nil {
			return 0, fmt.Errorf("pid %d: %w", pid, err)
		}
		total += sec
	}
	return total, nil
}

// clientCounts are what this process (the load generator) has cost so far in
// counts that do not depend on the machine's load: CPU seconds (user and
// system), minor page faults (each a page of memory the process touched for
// the first time, or again after handing it back) and garbage-collection
// cycles.
type clientCounts struct {
	cpu         float64
	minorFaults int64
	gcCycles    uint64
}

func readClientCounts() (clientCounts, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return clientCounts{}, err
	}
	m := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(m)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	return clientCounts{cpu: cpu, minorFaults: ru.Minflt, gcCycles: m[0].Value.Uint64()}, nil
}

// since is what the process cost between c0 and c.
func (c clientCounts) since(c0 clientCounts) clientCounts {
	return clientCounts{cpu: c.cpu - c0.cpu, minorFaults: c.minorFaults - c0.minorFaults, gcCycles: c.gcCycles - c0.gcCycles}
}

// parseCPUs reads a CPU list such as "0" or "2,3" (taskset's -c syntax,
// without ranges).
func parseCPUs(list string) (unix.CPUSet, error) {
	var set unix.CPUSet
	for part := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 0 {
			return set, fmt.Errorf("bad CPU %q in %q", part, list)
		}
		set.Set(n)
	}
	return set, nil
}

// pinSelf restricts every thread of this process, and so every thread it
// starts later (a new thread inherits its creator's affinity), to cpus.
func pinSelf(cpus string) error {
	set, err := parseCPUs(cpus)
	if err != nil {
		return err
	}
	tasks, err := filepath.Glob("/proc/self/task/*")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(filepath.Base(t))
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			return fmt.Errorf("pinning thread %d to CPUs %s: %w", tid, cpus, err)
		}
	}
	return nil
}
