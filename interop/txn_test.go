package interop

import (
	"context"
	"testing"
)

// TestJavaTransactions: the Java client's transactional producer writes 200 records
// in transactions of ten, aborting every third, and its read_committed consumer
// reads the topic back. Every committed record must be read exactly once, at the
// partition and offset its send was acknowledged with, and no aborted one at all.
// The client runs transaction version 2 (KIP-890): its transactional id's epoch
// was bumped by each of its EndTxn requests.
func TestJavaTransactions(t *testing.T) {
	c := clientNamed(t, "java")
	requireClient(t, c)
	tgt := startTarget(t)
	const topic = "interop-java-txn"
	createTopics(t, tgt.bootstrap, partitions, topic)
	s := runClient(t, c, job{bootstrap: tgt.bootstrap, topic: topic, mode: "txn"})
	if len(s.Produced)+len(s.Failed) != records || len(s.Failed) == 0 {
		t.Fatalf("%d committed and %d aborted records, want %d in all with some aborted", len(s.Produced), len(s.Failed), records)
	}
	type at struct {
		partition int32
		offset    int64
	}
	committed := map[string]at{}
	for _, p := range s.Produced {
		committed[string(p.Value)] = at{p.Partition, p.Offset}
	}
	aborted := map[string]bool{}
	for _, f := range s.Failed {
		if f.Error != "aborted" {
			t.Fatalf("send of %q failed: %s", f.Value, f.Error)
		}
		aborted[string(f.Value)] = true
	}
	seen := map[string]bool{}
	for _, r := range s.Consumed {
		v := string(r.Value)
		switch want, ok := committed[v]; {
		case aborted[v]:
			t.Errorf("aborted-read: %q at %d/%d", v, r.Partition, r.Offset)
		case !ok:
			t.Errorf("phantom: %q at %d/%d", v, r.Partition, r.Offset)
		case seen[v]:
			t.Errorf("duplicate: %q at %d/%d", v, r.Partition, r.Offset)
		case want != at{r.Partition, r.Offset}:
			t.Errorf("%q read at %d/%d, acknowledged at %d/%d", v, r.Partition, r.Offset, want.partition, want.offset)
		}
		seen[v] = true
	}
	for v := range committed {
		if !seen[v] {
			t.Errorf("lost-write: committed %q never read", v)
		}
	}
	const txnID = "strata-interop-java"
	described, err := newAdmin(t, tgt.bootstrap).DescribeTransactions(context.Background(), txnID)
	if err != nil {
		t.Fatal(err)
	}
	if d := described[txnID]; d.Err != nil || d.ProducerEpoch < records/10 {
		t.Fatalf("%s has epoch %d after %d transactions (err %v), want one bump per EndTxn", txnID, d.ProducerEpoch, records/10, d.Err)
	}
}
