package share

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/batch/batchtest"
	"github.com/strata-stream/strata/internal/replica"
	"github.com/strata-stream/strata/internal/wait"
)

// appendTxn appends a transactional batch of n records of producer pid.
func appendTxn(t *testing.T, rp *replica.Partition, pid int64, seq int32, n int) {
	t.Helper()
	recs := make([]batch.Record, n)
	for i := range recs {
		recs[i] = batch.Record{Value: []byte("txn")}
	}
	b, err := batch.Build(batch.BuildOptions{Idempotent: true, Transactional: true, ProducerID: pid, BaseSequence: seq}, recs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rp.Append(b, 1); err != nil {
		t.Fatal(err)
	}
}

// endTxn writes producer pid's transaction marker and waits for the high
// watermark to pass it.
func endTxn(t *testing.T, rp *replica.Partition, pid int64, commit bool) {
	t.Helper()
	res, err := rp.WriteTxnMarker(batch.Marker{ProducerID: pid, Commit: commit}, 0)
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the marker below the high watermark", func() bool { return rp.HighWatermark() > res.BaseOffset })
}

// acquiredOffsets lists the offsets a ShareFetch response acquired.
func acquiredOffsets(m *Manager, member string, epoch int32) []int64 {
	req := openFetch(member)
	req.ShareSessionEpoch, req.MaxRecords = epoch, 100
	var out []int64
	for _, t := range m.ShareFetch(context.Background(), req).Topics {
		for _, p := range t.Partitions {
			for _, a := range p.AcquiredRecords {
				for o := a.FirstOffset; o <= a.LastOffset; o++ {
					out = append(out, o)
				}
			}
		}
	}
	return out
}

// TestReadCommittedShareGroup: with share.isolation.level=read_committed a
// share group acquires records only below the last stable offset and never
// delivers those of an aborted transaction, as Kafka's share-partition leader
// (records of aborted transactions are archived); read_uncommitted delivers
// them all up to the high watermark.
func TestReadCommittedShareGroup(t *testing.T) {
	for _, committed := range []bool{true, false} {
		parts, rp := newTestParts(t, 1)
		cfg := testGroupConfig()
		cfg.ReadCommitted = committed
		m := NewManager(Config{Defaults: cfg}, &memStore{}, parts, nil)
		t.Cleanup(m.Close)

		appendRecords(t, rp, 1)   // 0
		appendTxn(t, rp, 5, 0, 2) // 1-2, aborted by 3
		endTxn(t, rp, 5, false)
		appendTxn(t, rp, 6, 0, 1) // 4, open: the last stable offset
		appendRecords(t, rp, 1)   // 5

		got := acquiredOffsets(m, "a", 0)
		want := []int64{0}
		if !committed {
			want = []int64{0, 1, 2, 4, 5}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("read_committed %v: acquired %v, want %v", committed, got, want)
		}
		if !committed {
			continue
		}
		endTxn(t, rp, 6, true) // 6
		if got := acquiredOffsets(m, "a", 1); !slices.Equal(got, []int64{4, 5}) {
			t.Fatalf("after the commit: acquired %v, want [4 5]", got)
		}
		sp := sharePart(m, "g")
		sp.mu.Lock()
		st, _ := sp.p.State(1)
		sp.mu.Unlock()
		if st != Archived {
			t.Errorf("aborted offset 1 is %v, want archived", st)
		}
	}
}

// TestAutoOffsetResetByDuration: share.auto.offset.reset=by_duration:PT1H starts
// a share partition without state at the first record of the last hour, as
// Kafka 4.1+ does; with none that recent, at the high watermark.
func TestAutoOffsetResetByDuration(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name  string
		ages  []time.Duration // of the records, in offset order
		first int64           // the first offset delivered, -1 for none
	}{
		{"recent records", []time.Duration{3 * time.Hour, 2 * time.Hour, 10 * time.Minute, time.Minute}, 2},
		{"all older", []time.Duration{3 * time.Hour, 2 * time.Hour}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parts, rp := newTestParts(t, 1)
			cfg := testGroupConfig()
			cfg.AutoOffsetReset = "by_duration:PT1H"
			m := NewManager(Config{Defaults: cfg, Now: func() time.Time { return now }}, &memStore{}, parts, nil)
			t.Cleanup(m.Close)
			for _, age := range tc.ages {
				if _, err := rp.Append(batchtest.Build(batchtest.Options{FirstTimestamp: now.Add(-age).UnixMilli()}), 1); err != nil {
					t.Fatal(err)
				}
			}
			wait.For(t, "the high watermark", func() bool { return rp.HighWatermark() == int64(len(tc.ages)) })
			got := acquiredOffsets(m, "a", 0)
			if tc.first < 0 {
				if len(got) != 0 {
					t.Fatalf("acquired %v, want nothing (every record is older than an hour)", got)
				}
				return
			}
			if len(got) == 0 || got[0] != tc.first {
				t.Fatalf("acquired %v, want offsets from %d", got, tc.first)
			}
		})
	}
}
