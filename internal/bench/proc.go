package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is the unit of /proc/PID/stat's CPU times (USER_HZ, 100 on Linux).
const clockTicks = 100

// ProcessCPU reads utime + stime of one process from /proc/PID/stat, in seconds.
func ProcessCPU(pid int) (float64, error) {
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

// ProcessReadable fails unless the CPU time and disk writes of pid can be
// read: it runs on this machine and this user may inspect it.
func ProcessReadable(pid int) error {
	if _, err := ProcessCPU(pid); err != nil {
		return err
	}
	_, err := processWriteBytes(pid)
	return err
}

// processWriteBytes reads write_bytes of one process from /proc/PID/io: the
// bytes it caused to be sent to the disk.
func processWriteBytes(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("no write_bytes in /proc/%d/io", pid)
}

// LoadAverage is the machine's 1, 5 and 15 minute load averages, or "unknown".
func LoadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// processCounters are processes' CPU seconds and bytes written to disk so far.
type processCounters struct {
	cpu   float64
	write int64
}

// readCounters sums the counters of the processes pids.
func readCounters(pids []int) (processCounters, error) {
	var c processCounters
	for _, pid := range pids {
		cpu, err := ProcessCPU(pid)
		if err != nil {
			return c, fmt.Errorf("broker pid %d: %w", pid, err)
		}
		w, err := processWriteBytes(pid)
		if err != nil {
			return c, fmt.Errorf("broker pid %d: %w", pid, err)
		}
		c.cpu, c.write = c.cpu+cpu, c.write+w
	}
	return c, nil
}
