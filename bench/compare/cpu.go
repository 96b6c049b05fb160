package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// clockTicks is the unit of /proc/PID/stat's CPU times (USER_HZ, 100 on Linux).
const clockTicks = 100

// cpuSeconds sums the user and system CPU time of the broker processes so far.
func (s *system) cpuSeconds() (float64, error) {
	var total float64
	for _, pid := range s.pids() {
		sec, err := processCPU(pid)
		if err != nil {
			return 0, fmt.Errorf("pid %d: %w", pid, err)
		}
		total += sec
	}
	return total, nil
}

// processCPU reads utime + stime of one process from /proc/PID/stat, in seconds.
func processCPU(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: count fields after its ')'.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed stat %q", data)
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state): utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("short stat %q", data)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("stat times %q %q", f[11], f[12])
	}
	return float64(utime+stime) / clockTicks, nil
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
