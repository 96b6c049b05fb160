package server

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/metadata"
)

// TestShareConnectionDropReleases: when a share consumer's connection drops,
// the broker ends the share sessions opened on it and releases what their
// member had acquired, as Kafka 4.1+ does (KAFKA-19015): another member gets
// the records at once rather than after the 30 s acquisition lock, at the
// next delivery count (Kafka counts a session release as a delivery since
// KAFKA-19972), and the dropped member's session is gone.
func TestShareConnectionDropReleases(t *testing.T) {
	n := startNode(t, nodeConfig(t.TempDir()))
	cl, adm := n.client(t)
	if _, err := adm.CreateTopic(context.Background(), 1, 1, nil, "jobs"); err != nil {
		t.Fatal(err)
	}
	if code := alterGroupConfig(t, cl, "g", metadata.GroupShareAutoOffsetReset, "earliest"); code != 0 {
		t.Fatalf("group configs: code %d", code)
	}
	for range 3 {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "jobs", Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	topicID := [16]byte(n.ctrl.Image().Topic("jobs").ID)

	crashed, _ := n.client(t)
	m1 := joinShareGroup(t, crashed, "g", "member-1", "jobs", topicID)
	if got := m1.fetch(5 * time.Second); len(got) != 3 {
		t.Fatalf("member-1 acquired %+v", got)
	}
	crashed.Close() // its connections drop with the records still acquired

	m2 := joinShareGroup(t, cl, "g", "member-2", "jobs", topicID)
	start := time.Now()
	got := m2.fetch(10 * time.Second)
	if len(got) != 3 {
		t.Fatalf("member-2 acquired %+v after %v: the dropped member's records stayed locked", got, time.Since(start))
	}
	for _, a := range got {
		if a.count != 2 {
			t.Errorf("offset %d redelivered at count %d, want 2", a.offset, a.count)
		}
	}

	// member-1 comes back on a new connection: its session ended with the old one.
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &m1.group, &m1.id, m1.epoch
	req.MaxWaitMillis, req.MaxBytes, req.MaxRecords = 0, 1<<20, 100
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Errorf("member-1's next ShareFetch in its old session: code %d, want SHARE_SESSION_NOT_FOUND", resp.ErrorCode)
	}
}
