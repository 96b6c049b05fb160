package server

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/txntest"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// fullDisk fails with ENOSPC the writes or the fsyncs of the files whose path
// holds part while on: the disk under one log is full.
type fullDisk struct {
	part string
	kind vfs.OpKind
	on   atomic.Bool
}

func (d *fullDisk) MaybeError(op vfs.Op) error {
	if d.on.Load() && op.Kind&d.kind != 0 && strings.Contains(op.Path, d.part) {
		return syscall.ENOSPC
	}
	return nil
}

// TestTxnDiskFull: when the disk under the data partition or under the
// coordinator's __transaction_state partition fills (a write or an fsync
// fails with ENOSPC) while a transaction produces or commits, every request
// is answered at once with success or a retriable code, never held until its
// timeout (an acks=all wait used to sleep out the whole request timeout when
// the log failed under it: Produce answered REQUEST_TIMED_OUT after 10 s, a
// coordinator's state write held EndTxn and the implicit add for 30 s). After
// a restart with space again, the producer goes on, the transactions it was
// told committed are read, and nothing is left open (last stable offset at the
// high-water mark: no hanging transaction).
//
// A commit whose marker cannot be written (the data partition's disk full)
// meets the next transaction's first produce while the marker is owed: its
// Ongoing state, which names the marker as owed, is committed, and the node
// then stops, cleanly or by a power cut (powercut: the node runs on a
// crashable in-memory filesystem and restarts on what was synced). The
// coordinator that loads the state writes the owed marker: the transaction
// told committed is read (without the owed marker it was lost, aborted by the
// next transaction's abort).
func TestTxnDiskFull(t *testing.T) {
	const topic, id = "txdisk", "disk-tx"
	for _, where := range []string{"/" + topic + "-0/", "/__transaction_state-0/"} {
		for _, kind := range []vfs.OpKind{vfs.OpWrite, vfs.OpSync} {
			for _, at := range []string{"produce", "commit"} {
				t.Run(strings.Trim(where, "/")+"/"+kind.String()+"/"+at, func(t *testing.T) {
					testTxnDiskFull(t, topic, id, &fullDisk{part: where, kind: kind}, at == "commit", false)
				})
			}
		}
	}
	t.Run(topic+"-0/write/commit/powercut", func(t *testing.T) {
		testTxnDiskFull(t, topic, id, &fullDisk{part: "/" + topic + "-0/", kind: vfs.OpWrite}, true, true)
	})
}

func testTxnDiskFull(t *testing.T, topic, id string, disk *fullDisk, atCommit, powerCut bool) {
	ctx := context.Background()
	cfg := nodeConfig(t.TempDir())
	cfg.TransactionStatePartitions = 1
	start := func(fsys vfs.FS) (*Node, *kgo.Client) {
		t.Helper()
		n := startOn(t, cfg, fsys)
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.RequestRetries(0))
		if err != nil {
			n.Close()
			t.Fatal(err)
		}
		return n, cl
	}
	var base vfs.FS = vfs.Default
	mem := vfs.NewMem()
	if powerCut {
		base = mem
	}
	n, cl := start(vfs.NewErrorFS(base, disk))
	defer func() { cl.Close(); n.Close() }()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}

	// Each request on its own, no client retries: the answer and how long it took.
	var pid int64
	var epoch int16
	initProducer := func(cl *kgo.Client) {
		t.Helper()
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(id), 60000
		wait.For(t, "InitProducerId", func() bool {
			resp, err := req.RequestWith(ctx, cl)
			if err == nil && resp.ErrorCode == 0 {
				pid, epoch = resp.ProducerID, resp.ProducerEpoch
			}
			return err == nil && resp.ErrorCode == 0
		})
	}
	const bound = 3 * time.Second // far below every request timeout (10 s, 30 s)
	timed := func(what string, f func() error) error {
		t.Helper()
		began := time.Now()
		err := f()
		if took := time.Since(began); took > bound {
			t.Fatalf("%s answered after %v (%v), want within %v", what, took, err, bound)
		}
		var ke *kerr.Error
		// CONCURRENT_TRANSACTIONS is retried by clients (the markers are not
		// written yet); INVALID_TXN_STATE ends a transaction whose produce failed.
		if err != nil && (!errors.As(err, &ke) || !ke.Retriable) && !errors.Is(err, kerr.ConcurrentTransactions) && !errors.Is(err, kerr.InvalidTxnState) {
			t.Fatalf("%s: %v, want success or a retriable error", what, err)
		}
		return err
	}
	produce := func(cl *kgo.Client, v string) error {
		return timed("Produce "+v, func() error {
			return txntest.ProduceWithID(ctx, cl, id, topic, 0, pid, epoch, 0, true, v)
		})
	}
	end := func(cl *kgo.Client, commit bool) error {
		return timed("EndTxn", func() error {
			req := kmsg.NewPtrEndTxnRequest()
			req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return err
			}
			if resp.ErrorCode == 0 {
				epoch = resp.ProducerEpoch
			}
			return kerr.ErrorForCode(resp.ErrorCode)
		})
	}

	initProducer(cl)
	var committed []string // told committed
	for _, v := range []string{"a", "b"} {
		if produce(cl, v) != nil || end(cl, true) != nil {
			t.Fatalf("transaction %s before the disk filled failed", v)
		}
		committed = append(committed, v)
	}
	if !atCommit {
		disk.on.Store(true)
	}
	// A commit answered with an error may still have happened (its Prepare
	// state reached the file though its fsync failed): maybe.
	maybe := []string{"c", "d"}
	produced := produce(cl, "c") == nil
	disk.on.Store(true)
	if err := end(cl, produced); err == nil && produced {
		committed = append(committed, "c")
	}
	// Still full: the next transaction's first produce and end are answered too.
	if produce(cl, "d") == nil && end(cl, true) == nil {
		committed = append(committed, "d")
	}

	// Space again, and a restart (a failed log stays failed until reopened).
	disk.on.Store(false)
	cl.Close()
	if powerCut {
		base = mem.CrashClone() // before Close: only what was synced
	}
	n.Close()
	n, cl = start(base)
	initProducer(cl)
	if err := produce(cl, "e"); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if err := end(cl, true); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	committed = append(committed, "e")

	// "e" is the log's last transaction: read up to it.
	got := readCommittedThrough(t, n.KafkaAddr(), topic, "e")
	for _, v := range committed {
		if !slices.Contains(got, v) {
			t.Fatalf("read_committed saw %v, missing %q (told committed: %v)", got, v, committed)
		}
	}
	for _, v := range got {
		if !slices.Contains(committed, v) && !slices.Contains(maybe, v) {
			t.Fatalf("read_committed saw %v: %q was never committed", got, v)
		}
	}
	waitNoOpenTxn(t, cl, topic)
}

// waitNoOpenTxn waits until partition 0 of topic has no transaction left open:
// its last stable offset at its high-water mark.
func waitNoOpenTxn(t *testing.T, cl *kgo.Client, topic string) {
	t.Helper()
	ctx, adm := context.Background(), kadm.NewClient(cl)
	wait.For(t, "no transaction left open", func() bool {
		hwm, err1 := adm.ListEndOffsets(ctx, topic)
		lso, err2 := adm.ListCommittedOffsets(ctx, topic)
		h, _ := hwm.Lookup(topic, 0)
		l, _ := lso.Lookup(topic, 0)
		return err1 == nil && err2 == nil && h.Offset == l.Offset
	})
}

// readCommittedThrough consumes topic's only partition read_committed from the
// start until it reads last, and returns the values read in order.
func readCommittedThrough(t *testing.T, addr, topic, last string) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []string
	for !slices.Contains(got, last) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed saw %v, not %q", got, last)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}
