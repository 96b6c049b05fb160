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
	envKinds     = "CHAOS_KINDS"      // multi-process runs: faults (and operations) to draw from (default all)
	envOps       = "CHAOS_OPS"        // campaign: 1: every multi-process run with operations and a broker-only node
	envShare     = "CHAOS_SHARE"      // campaign: 1: every plain run (both modes) with the share-group workload
	envTLS       = "CHAOS_TLS"        // campaign: 1: every run on a secured cluster (TLS, SASL/SCRAM, ACLs); no operations, no share groups
)

// processKinds is what a multi-process run of variant v draws from:
// ProcessKinds (and OpKinds with operations), or exactly the comma-separated
// CHAOS_KINDS (operations only in a variant with them).
func processKinds(t *testing.T, v variant) []Kind {
	env := os.Getenv(envKinds)
	if env == "" {
		if v.ops {
			return append(slices.Clone(ProcessKinds), OpKinds...)
		}
		return ProcessKinds
	}
	allowed := ProcessKinds
	if v.ops {
		allowed = append(slices.Clone(ProcessKinds), OpKinds...)
	}
	var kinds []Kind
	for _, k := range strings.Split(env, ",") {
		if !slices.Contains(allowed, Kind(k)) {
			t.Fatalf("%s: %q is not one of %v", envKinds, k, allowed)
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

// variant is what a multi-process run adds to the plain workload.
type variant struct {
	txn    bool // the transactional workload instead of the plain one
	tiered bool // the workload's topic is tiered (remote.storage.enable=true)
	ops    bool // a broker-only node, and OpKinds among the faults
	share  bool // the share-group workload beside the plain one (not with txn)
	// secure: TLS on every listener, SASL/SCRAM, ACLs (security.go); not
	// with ops (the strata CLI they run is not given credentials) nor share
	// (its HTTP consumers are not).
	secure bool
}

func (v variant) String() string {
	name := "processes"
	if v.txn {
		name = "txn"
	}
	if v.tiered {
		name += "+tiered"
	}
	if v.ops {
		name += "+ops"
	}
	if v.share {
		name += "+share"
	}
	if v.secure {
		name += "+tls"
	}
	return name
}

// Tiered runs: segments of 8 KiB and 16 KiB kept locally, so segments are
// uploaded and deleted locally within seconds; batches of at most 4 KiB fit a
// segment (RECORD_LIST_TOO_LARGE otherwise, as in Kafka).
var tieredTopicConfigs = map[string]string{
	"remote.storage.enable":  "true",
	"internal.segment.bytes": "8192",
	"local.retention.bytes":  "16384",
}

const tieredBatchMaxBytes = 4 << 10

// processRun runs one seeded multi-process run of variant v.
func processRun(t *testing.T, seed uint64, nodes int, faultTime time.Duration, v variant) RunResult {
	t.Helper()
	topic := "chaos"
	if v.txn {
		topic = "txn"
	}
	c := startProcessCluster(t, nodes, topic, processOptions{spare: v.ops, tiered: v.tiered, sec: v.security(t)})
	if v.secure {
		if err := grant(c.adm, topic, v.txn); err != nil {
			t.Fatalf("granting the workload its ACLs: %v", err)
		}
	}
	cfg := runConfig{
		name: fmt.Sprintf("%s/%d", v, seed), seed: seed, nodes: c.brokers(), kinds: processKinds(t, v),
		faultTime: faultTime, topic: topic, partitions: 4, interval: 5 * time.Millisecond, share: v.shareConfig(),
	}
	if v.tiered {
		cfg.topicConfigs, cfg.batchMaxBytes = tieredTopicConfigs, tieredBatchMaxBytes
	}
	if v.txn {
		cfg.roles = []Role{Coordinator, Coordinator} // a third of the faults that hit one node
		return runTxn(t, c, cfg)
	}
	return run(t, c, cfg, &history.Recorder{})
}

// shareConfig is v's share workload: the campaign's, or nil without one.
func (v variant) shareConfig() *shareConfig {
	if !v.share {
		return nil
	}
	return &shareConfig{}
}

// security is the set-up of v's cluster: nil unless v.secure. A secured run
// with operations or share groups fails t.
func (v variant) security(t *testing.T) *security {
	t.Helper()
	if !v.secure {
		return nil
	}
	if v.ops || v.share {
		t.Fatalf("%s: a secured run has no operations and no share groups", v)
	}
	return newSecurity(t)
}

// memRun runs one seeded in-process run with the given faults, with the
// share-group workload if v.share, on a secured cluster if v.secure.
func memRun(t *testing.T, name string, seed uint64, kinds []Kind, maxFaults int, v variant) RunResult {
	t.Helper()
	c := startMemCluster(t, 3, "chaos", seed, v.security(t))
	if v.secure {
		if err := grant(c.adm, "chaos", false); err != nil {
			t.Fatalf("granting the workload its ACLs: %v", err)
		}
	}
	return run(t, c, runConfig{
		name: fmt.Sprintf("%s/%d", name, seed), seed: seed, nodes: 3, kinds: kinds,
		faultTime: 10 * time.Minute, maxFaults: maxFaults, topic: "chaos", partitions: 4, interval: 10 * time.Millisecond,
		share: v.shareConfig(),
	}, &history.Recorder{})
}

// txnMemRun runs one seeded in-process run of the transactional workload, on
// a secured cluster if v.secure.
func txnMemRun(t *testing.T, name string, seed uint64, kinds []Kind, maxFaults int, v variant) RunResult {
	t.Helper()
	c := startMemCluster(t, 3, "txn", seed, v.security(t))
	if v.secure {
		if err := grant(c.adm, "txn", true); err != nil {
			t.Fatalf("granting the workload its ACLs: %v", err)
		}
	}
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
	judge(t, processRun(t, uint64(envInt(t, envSeed, 1)), 3, time.Minute, variant{}))
}

// TestPowerLoss cuts the power of every node at once, twice, under the
// workload: every acknowledged record must survive on what was fsynced. (Its
// first run lost every record: nothing fsynced the directories holding the
// data dir and <data-dir>/logs, so the cut took them whole; fixed in 348c3b3.)
func TestPowerLoss(t *testing.T) {
	judge(t, memRun(t, "power-loss", uint64(envInt(t, envSeed, 1)), []Kind{PowerLoss}, 2, variant{}))
}

// TestDiskFaults fills one node's disk or fails its fsyncs, then reboots it.
func TestDiskFaults(t *testing.T) {
	judge(t, memRun(t, "disk", uint64(envInt(t, envSeed, 1)), []Kind{DiskFull, FsyncFailure}, 3, variant{}))
}

// TestShareFaults runs the share-group workload (sharework.go) beside the
// plain one: 30 seconds of seeded kills, pauses, rolling restarts and
// partitions while three share consumers accept, release and reject records
// through the HTTP share API, a dead-letter topic taking the rejected ones and
// those that reach the delivery count limit; history.CheckShare judges it.
// Part of the campaign (CHAOS_CAMPAIGN=1): on a loaded machine the share
// consumers (one HTTP acknowledgement per record) fall behind the producers,
// and a partition's backlog can outlast the 90 s drain (docs/reliability.md).
// CI runs TestShareScriptedFaults.
func TestShareFaults(t *testing.T) {
	if os.Getenv(envCampaign) != "1" {
		t.Skipf("runs with %s=1", envCampaign)
	}
	judge(t, processRun(t, uint64(envInt(t, envSeed, 1)), 3, 30*time.Second, variant{share: true}))
}

// TestSharePowerLoss cuts the power of every node once and fails one node's
// disk or fsyncs under the share-group workload: the share-partition state
// (on __share_group_state) must come back with every answered acknowledgement.
// Part of the campaign (CHAOS_CAMPAIGN=1), as TestShareFaults.
func TestSharePowerLoss(t *testing.T) {
	if os.Getenv(envCampaign) != "1" {
		t.Skipf("runs with %s=1", envCampaign)
	}
	judge(t, memRun(t, "share-in-process", uint64(envInt(t, envSeed, 1)), []Kind{PowerLoss, DiskFull, FsyncFailure}, 3, variant{share: true}))
}

// shareScript is TestShareScriptedFaults's schedule: in order, the faults
// that found share-group bugs in the seeded runs (docs/reliability.md).
var shareScript = []Fault{
	// The leader of a share partition, records acquired and dead letters on
	// their way: the new leader restores the counts last saved (a record at
	// the limit is archived, not delivered again) and writes the dead letters
	// left Archiving with their values.
	{Kind: Kill, Role: Leader, Partition: 0, Gap: 500 * time.Millisecond, Hold: 2 * time.Second},
	// The group's coordinator: the membership, in memory only, moves with it,
	// and the members must follow it.
	{Kind: Kill, Role: ShareCoordinator, Gap: 500 * time.Millisecond, Hold: 2 * time.Second},
	// The share coordinator of partition 1: its state saves fail (answered
	// 504; the members stay), then it reboots and the state partition it led
	// is loaded by another node.
	{Kind: FsyncFailure, Role: ShareState, Partition: 1, Gap: 500 * time.Millisecond, Hold: 1500 * time.Millisecond},
	// Every node at once: the share state comes back from what was fsynced.
	{Kind: PowerLoss, Role: Any, Gap: 500 * time.Millisecond},
}

// TestShareScriptedFaults is CI's share-group run: the share-group workload
// beside the plain one on an in-process cluster (no process start-up), under
// shareScript's faults, judged by history.CheckShare as the campaign's runs.
// Its size is fixed so that a loaded machine makes it slower, not different:
// 600 records (the producers stop there), eight consumers (two per partition,
// so one a kill leaves behind in the group holds no partition alone until its
// session expires 45 s later), five records a poll and a 3 s lock.
func TestShareScriptedFaults(t *testing.T) {
	seed := uint64(envInt(t, envSeed, 1))
	start := time.Now()
	c := startMemCluster(t, 3, "chaos", seed, nil)
	t.Logf("cluster started in %.1fs", time.Since(start).Seconds())
	r := run(t, c, runConfig{
		name: fmt.Sprintf("share-scripted/%d", seed), seed: seed, nodes: 3, topic: "chaos", partitions: 4,
		interval: 50 * time.Millisecond, sends: 300, script: shareScript,
		share: &shareConfig{consumers: 8, lock: 3 * time.Second, pollRecords: 5},
	}, &history.Recorder{})
	judge(t, r)
	// What the run is for happened: every fault, and records dead-lettered at
	// the delivery count limit.
	if n := len(r.Events); n != len(shareScript) {
		t.Errorf("%d faults injected of %d", n, len(shareScript))
	}
	if r.Share == nil || r.Share.DeadLetterAtLimit == 0 {
		t.Errorf("no record dead-lettered at the delivery count limit: %+v", r.Share)
	}
}

// TestTxnFaults is CI's run of the newer features under faults: 15 seconds of
// seeded kills, pauses, rolling restarts and partitions (a third of those that
// hit one node aimed at the transaction coordinator), replica moves, a
// cancelled move, a broker-only node retired and added back and promoted to
// a voter, under transactional producers writing to a tiered topic,
// read_committed readers and a read-process-write stage.
func TestTxnFaults(t *testing.T) {
	judge(t, processRun(t, uint64(envInt(t, envSeed, 1)), 3, 15*time.Second, variant{txn: true, tiered: true, ops: true}))
}

// TestTxnPowerLoss cuts the power of every node once under the transactional
// workload: committed transactions survive whole, open ones are aborted. Part
// of the campaign (CHAOS_CAMPAIGN=1); CI runs TestTxnFaults.
func TestTxnPowerLoss(t *testing.T) {
	if os.Getenv(envCampaign) != "1" {
		t.Skipf("runs with %s=1", envCampaign)
	}
	judge(t, txnMemRun(t, "txn-power-loss", uint64(envInt(t, envSeed, 1)), []Kind{PowerLoss}, 1, variant{}))
}

// TestTLSFaults is CI's run on a secured cluster (security.go): TLS on every
// listener, nodes and clients logging in with SCRAM, ACLs granting the
// workload exactly what it needs. Ten seconds of seeded kills, pauses,
// rolling restarts, partitions and data cuts under the plain workload:
// nothing the plaintext runs promise may weaken, and the proxies must still
// cut the nodes' own connections although TLS hides their client ids. (The
// transactional workload runs secured in the campaign, CHAOS_TLS=1: its
// warm-up alone takes longer than CI's budget for this test.)
func TestTLSFaults(t *testing.T) {
	judge(t, processRun(t, uint64(envInt(t, envSeed, 1)), 3, 10*time.Second, variant{secure: true}))
}

// tlsSuffix is what an in-process run's name gets on a secured cluster.
func tlsSuffix(v variant) string {
	if v.secure {
		return "+tls"
	}
	return ""
}

// campaignVariant is the campaign's i-th multi-process run's variant: of every
// four, the plain workload, the transactional one with operations (on a tiered
// topic every other time), the plain one on a tiered topic with operations,
// and the plain one on five nodes.
func campaignVariant(i int) variant {
	switch i % 4 {
	case 1:
		return variant{txn: true, ops: true, tiered: i%8 == 5}
	case 2:
		return variant{tiered: true, ops: true}
	}
	return variant{}
}

// TestCampaign is `make chaos`: CHAOS_RUNS multi-process runs and
// CHAOS_MEM_RUNS in-process runs (every other one transactional) with
// consecutive seeds, then the results table into CHAOS_REPORT's results
// section.
func TestCampaign(t *testing.T) {
	if os.Getenv(envCampaign) != "1" {
		t.Skipf("the long campaign runs with %s=1 (make chaos)", envCampaign)
	}
	first := uint64(envInt(t, envSeed, 1))
	faultTime := time.Duration(envInt(t, envFaultTime, 60)) * time.Second
	var runs []RunResult
	for i := range envInt(t, envRuns, 20) {
		seed, nodes := first+uint64(i), 3
		v := campaignVariant(i)
		if i%4 == 3 {
			nodes = 5
		}
		v.ops = v.ops || os.Getenv(envOps) == "1"
		v.share = !v.txn && os.Getenv(envShare) == "1"
		if os.Getenv(envTLS) == "1" {
			v.secure, v.ops, v.share = true, false, false
		}
		t.Run(fmt.Sprintf("%s-%d", v, seed), func(t *testing.T) {
			r := processRun(t, seed, nodes, faultTime, v)
			runs = append(runs, r)
			judge(t, r)
		})
	}
	for i := range envInt(t, envMemRuns, 4) {
		seed := first + uint64(i)
		t.Run(fmt.Sprintf("in-process-%d", seed), func(t *testing.T) {
			kinds := []Kind{PowerLoss, DiskFull, FsyncFailure}
			v := variant{secure: os.Getenv(envTLS) == "1"}
			if i%2 == 1 {
				r := txnMemRun(t, "txn-in-process"+tlsSuffix(v), seed, kinds, 6, v)
				runs = append(runs, r)
				judge(t, r)
				return
			}
			v.share = !v.secure && os.Getenv(envShare) == "1"
			r := memRun(t, "in-process"+tlsSuffix(v), seed, kinds, 6, v)
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
