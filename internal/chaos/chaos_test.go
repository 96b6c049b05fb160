package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/chaos/history"
	"github.com/strata-stream/strata/internal/testcluster"
)

func TestMain(m *testing.M) { testcluster.Main(m) }

// Environment knobs of the suite.
const (
	envSeed      = "CHAOS_SEED"       // seed of the short runs (default 1)
	envCampaign  = "CHAOS_CAMPAIGN"   // 1: run TestCampaign
	envRuns      = "CHAOS_RUNS"       // campaign: multi-process runs (default 20)
	envMemRuns   = "CHAOS_MEM_RUNS"   // campaign: in-process runs (default 4)
	envFaultTime = "CHAOS_FAULT_TIME" // campaign: faulting time per run (default 60s)
	envReport    = "CHAOS_REPORT"     // campaign: file whose results section to rewrite
)

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

// processRun runs one seeded multi-process run.
func processRun(t *testing.T, seed uint64, nodes int, faultTime time.Duration) RunResult {
	t.Helper()
	c := startProcessCluster(t, nodes, "chaos")
	return run(t, c, runConfig{
		name: fmt.Sprintf("processes/%d", seed), seed: seed, nodes: nodes, kinds: ProcessKinds,
		faultTime: faultTime, topic: "chaos", partitions: 4, interval: 5 * time.Millisecond,
	}, &history.Recorder{})
}

// memRun runs one seeded in-process run with the given faults.
func memRun(t *testing.T, name string, seed uint64, kinds []Kind, maxFaults int) RunResult {
	t.Helper()
	return memRunOn(t, name, seed, kinds, maxFaults, true)
}

// memRunOn is memRun, choosing whether the harness works around the logs
// directory bug (memCluster.syncLogsDir).
func memRunOn(t *testing.T, name string, seed uint64, kinds []Kind, maxFaults int, syncLogsDir bool) RunResult {
	t.Helper()
	rec := &history.Recorder{}
	c := startMemCluster(t, 3, "chaos", seed, rec, syncLogsDir)
	return run(t, c, runConfig{
		name: fmt.Sprintf("%s/%d", name, seed), seed: seed, nodes: 3, kinds: kinds,
		faultTime: 10 * time.Minute, maxFaults: maxFaults, topic: "chaos", partitions: 4, interval: 10 * time.Millisecond,
	}, rec)
}

// judge logs a run's schedule and results and fails t on any anomaly or
// recovery finding. A failed run's history is kept in a file for the report.
func judge(t *testing.T, r RunResult) {
	t.Helper()
	t.Logf("\n%s\n%s", Table([]RunResult{r}), Details([]RunResult{r}))
	if r.OK() {
		return
	}
	t.Errorf("run %s (seed %d) found:\n%s%v\nits history: %s", r.Name, r.Seed, r.Check.Summary(), r.Findings, keepHistory(t, r.history))
}

// TestProcessFaults is CI's multi-process run: a minute of seeded kills,
// pauses, rolling restarts and network partitions on a 3-node cluster.
func TestProcessFaults(t *testing.T) {
	judge(t, processRun(t, uint64(envInt(t, envSeed, 1)), 3, time.Minute))
}

// TestPowerLoss cuts the power of every node at once, twice, under the
// workload: every acknowledged record must survive on what was fsynced.
func TestPowerLoss(t *testing.T) {
	judge(t, memRun(t, "power-loss", uint64(envInt(t, envSeed, 1)), []Kind{PowerLoss}, 2))
}

// knownBugsEnv, set to 1, runs the tests of known bugs instead of skipping them.
const knownBugsEnv = "CHAOS_KNOWN_BUGS"

// TestPowerLossKeepsTheLogsDirectory is the power loss without the harness's
// workaround. Known bug: internal/replica.NewManager creates <data-dir>/logs
// with MkdirAll and nothing ever fsyncs <data-dir> (the cluster id's SyncDir
// runs before logs exists), so the logs directory's name is never durable and
// a power cut can drop every partition at once, acknowledged records included.
func TestPowerLossKeepsTheLogsDirectory(t *testing.T) {
	if os.Getenv(knownBugsEnv) != "1" {
		t.Skipf("known bug (%s=1 runs it): <data-dir>/logs is never made durable", knownBugsEnv)
	}
	judge(t, memRunOn(t, "power-loss-no-workaround", uint64(envInt(t, envSeed, 1)), []Kind{PowerLoss}, 1, false))
}

// TestDiskFaults fills one node's disk or fails its fsyncs, then reboots it.
func TestDiskFaults(t *testing.T) {
	judge(t, memRun(t, "disk", uint64(envInt(t, envSeed, 1)), []Kind{DiskFull, FsyncFailure}, 3))
}

// TestCampaign is `make chaos`: CHAOS_RUNS multi-process runs and
// CHAOS_MEM_RUNS in-process runs with consecutive seeds, then the results table
// into CHAOS_REPORT's results section.
func TestCampaign(t *testing.T) {
	if os.Getenv(envCampaign) != "1" {
		t.Skipf("the long campaign runs with %s=1 (make chaos)", envCampaign)
	}
	first := uint64(envInt(t, envSeed, 1))
	faultTime := time.Duration(envInt(t, envFaultTime, 60)) * time.Second
	var runs []RunResult
	for i := range envInt(t, envRuns, 20) {
		seed, nodes := first+uint64(i), 3
		if i%4 == 3 {
			nodes = 5
		}
		t.Run(fmt.Sprintf("processes-%d", seed), func(t *testing.T) {
			r := processRun(t, seed, nodes, faultTime)
			runs = append(runs, r)
			judge(t, r)
		})
	}
	for i := range envInt(t, envMemRuns, 4) {
		seed := first + uint64(i)
		t.Run(fmt.Sprintf("in-process-%d", seed), func(t *testing.T) {
			r := memRun(t, "in-process", seed, []Kind{PowerLoss, DiskFull, FsyncFailure}, 4)
			runs = append(runs, r)
			judge(t, r)
		})
	}
	t.Logf("\n%s\n%s", Table(runs), Details(runs))
	if path := os.Getenv(envReport); path != "" {
		section := fmt.Sprintf("Generated by `make chaos` on %s (CHAOS_SEED=%d, %s=%d, %s=%d, %s=%v).\n\n%s\n<details><summary>Schedules as resolved, per run</summary>\n\n```\n%s```\n</details>\n",
			time.Now().UTC().Format("2006-01-02"), first, envRuns, envInt(t, envRuns, 20), envMemRuns, envInt(t, envMemRuns, 4),
			envFaultTime, faultTime, Table(runs), Details(runs))
		if err := updateReport(path, section); err != nil {
			t.Error(err)
		}
	}
}

// keepHistory writes a history to a file that outlives the test, for a bug
// report, and returns its path.
func keepHistory(t *testing.T, h history.History) string {
	t.Helper()
	f, err := os.CreateTemp("", "chaos-history-*.json")
	if err != nil {
		t.Log(err)
		return ""
	}
	defer f.Close()
	if err := json.NewEncoder(f).Encode(h); err != nil {
		t.Log(err)
	}
	return filepath.Clean(f.Name())
}
