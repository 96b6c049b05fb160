package main

import (
	"fmt"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
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

// clientCounts are what this process (the load generator) has cost so far:
// minor page faults (each a page of memory the process touched for the first
// time, or again after handing it back), garbage-collection cycles, its user
// and system CPU seconds, and the Produce requests its clients wrote (and their
// bytes, size prefixes included).
type clientCounts struct {
	minorFaults   int64
	gcCycles      uint64
	cpuSeconds    float64
	produceWrites int64
	produceBytes  int64
}

// produceWrites counts the Produce requests every client of the workloads
// writes (workloadConfig adds it to their hooks).
var produceWrites produceWriteCounter

type produceWriteCounter struct{ writes, bytes atomic.Int64 }

// OnBrokerWrite implements kgo.HookBrokerWrite.
func (c *produceWriteCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, bytesWritten int, _, _ time.Duration, err error) {
	if key == 0 && err == nil {
		c.writes.Add(1)
		c.bytes.Add(int64(bytesWritten))
	}
}

func readClientCounts() (clientCounts, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return clientCounts{}, err
	}
	m := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(m)
	return clientCounts{minorFaults: ru.Minflt, gcCycles: m[0].Value.Uint64(),
		cpuSeconds:    float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9,
		produceWrites: produceWrites.writes.Load(), produceBytes: produceWrites.bytes.Load()}, nil
}

// since is what the process cost between c0 and c.
func (c clientCounts) since(c0 clientCounts) clientCounts {
	return clientCounts{minorFaults: c.minorFaults - c0.minorFaults, gcCycles: c.gcCycles - c0.gcCycles,
		cpuSeconds: c.cpuSeconds - c0.cpuSeconds, produceWrites: c.produceWrites - c0.produceWrites,
		produceBytes: c.produceBytes - c0.produceBytes}
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
