package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
	envKinds     = "CHAOS_KINDS"      // multi-process runs: faults to draw from (default all)
)

// processKinds is ProcessKinds, or the comma-separated CHAOS_KINDS.
func processKinds(t *testing.T) []Kind {
	v := os.Getenv(envKinds)
	if v == "" {
		return ProcessKinds
	}
	var kinds []Kind
	for _, k := range strings.Split(v, ",") {
		if !slices.Contains(ProcessKinds, Kind(k)) {
			t.Fatalf("%s: %q is not one of %v", envKinds, k, ProcessKinds)
		}
		kinds = append(kinds, Kind(k))
	}
	return kinds
}

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
		name: fmt.Sprintf("processes/%d", seed), seed: seed, nodes: nodes, kinds: processKinds(t),
		faultTime: faultTime, topic: "chaos", partitions: 4, interval: 5 * time.Millisecond,
	}, &history.Recorder{})
}

// memRun runs one seeded in-process run with the given faults.
func memRun(t *testing.T, name string, seed uint64, kinds []Kind, maxFaults int) RunResult {
	t.Helper()
	c := startMemCluster(t, 3, "chaos", seed)
	return run(t, c, runConfig{
		name: fmt.Sprintf("%s/%d", name, seed), seed: seed, nodes: 3, kinds: kinds,
		faultTime: 10 * time.Minute, maxFaults: maxFaults, topic: "chaos", partitions: 4, interval: 10 * time.Millisecond,
	}, &history.Recorder{})
}

// txnProcessRun runs one seeded multi-process run of the transactional
// workload; the schedule may also pick the transaction coordinator.
func txnProcessRun(t *testing.T, seed uint64, nodes int, faultTime time.Duration) RunResult {
	t.Helper()
	c := startProcessCluster(t, nodes, "txn")
	return runTxn(t, c, runConfig{
		name: fmt.Sprintf("txn-processes/%d", seed), seed: seed, nodes: nodes, kinds: processKinds(t),
		faultTime: faultTime, topic: "txn", partitions: 4, roles: []Role{Coordinator, Coordinator},
	})
}

// txnMemRun runs one seeded in-process run of the transactional workload.
func txnMemRun(t *testing.T, name string, seed uint64, kinds []Kind, maxFaults int) RunResult {
	t.Helper()
	c := startMemCluster(t, 3, "txn", seed)
	return runTxn(t, c, runConfig{
		name: fmt.Sprintf("%s/%d", name, seed), seed: seed, nodes: 3, kinds: kinds,
		faultTime: 10 * time.Minute, maxFaults: maxFaults, topic: "txn", partitions: 4, roles: []Role{Coordinator},
	})
}

// judge logs a run's schedule and results and fails t on any anomaly or
// recovery finding. A failed run's history and node logs are kept in files for
// the report.
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
// workload: every acknowledged record must survive on what was fsynced. (Its
// first run lost every record: nothing fsynced the directories holding the
// data dir and <data-dir>/logs, so the cut took them whole; fixed in 348c3b3.)
func TestPowerLoss(t *testing.T) {
	judge(t, memRun(t, "power-loss", uint64(envInt(t, envSeed, 1)), []Kind{PowerLoss}, 2))
}

// TestDiskFaults fills one node's disk or fails its fsyncs, then reboots it.
func TestDiskFaults(t *testing.T) {
	judge(t, memRun(t, "disk", uint64(envInt(t, envSeed, 1)), []Kind{DiskFull, FsyncFailure}, 3))
}

// TestTxnFaults is CI's transactional run: half a minute of seeded kills,
// pauses, rolling restarts and partitions, a third of those that hit one node
// aimed at the transaction coordinator, under transactional producers,
// read_committed readers and a read-process-write stage.
func TestTxnFaults(t *testing.T) {
	judge(t, txnProcessRun(t, uint64(envInt(t, envSeed, 1)), 3, 30*time.Second))
}

// TestTxnPowerLoss cuts the power of every node once under the transactional
// workload: committed transactions survive whole, open ones are aborted.
func TestTxnPowerLoss(t *testing.T) {
	judge(t, txnMemRun(t, "txn-power-loss", uint64(envInt(t, envSeed, 1)), []Kind{PowerLoss}, 1))
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
			r := memRun(t, "in-process", seed, []Kind{PowerLoss, DiskFull, FsyncFailure}, 6)
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
func keepHistory(t *testing.T, h any) string {
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
