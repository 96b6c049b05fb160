package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/wait"
)

// TestGroupDescribeKIP848 describes a running KIP-848 consumer group: its
// state, assignor and member with the member's assignment, and per partition
// the member that owns it, whether or not it has a commit. DescribeGroups
// answers such a group GROUP_ID_NOT_FOUND, which was described Dead with no
// members.
func TestGroupDescribeKIP848(t *testing.T) {
	addr := broker(t)
	topic, group := topicName(t), topicName(t)
	mustRun(t, "topic", "create", topic, "-p", "2")
	if r := runIn(t, "a\nb\nc\n", "produce", topic, "--partition", "0"); r.code != 0 {
		t.Fatalf("produce: %s", r)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ServerSideBalancer(), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for read := 0; read < 3; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll: %v", err)
		}
		read += fs.NumRecords()
	}

	describe := func(want func(describedGroupJSON) error) {
		t.Helper()
		wait.Eventually(t, 30*time.Second, "group describe of a KIP-848 group", func() error {
			r := runAt(t, addr, "", "group", "describe", group, "--output", "json")
			var got []describedGroupJSON
			if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil || len(got) != 1 {
				return fmt.Errorf("%s", r)
			}
			return want(got[0])
		})
	}
	member := func(d describedGroupJSON) (string, error) {
		if d.State != "Stable" || d.ProtocolType != "consumer" || d.Protocol == "" || len(d.Members) != 1 {
			return "", fmt.Errorf("group %+v", d)
		}
		m := d.Members[0]
		if !slices.Equal(m.Assignment[topic], []int32{0, 1}) {
			return "", fmt.Errorf("member %+v", m)
		}
		return m.MemberID, nil
	}
	// No commit yet: both assigned partitions, lag from the log start.
	describe(func(d describedGroupJSON) error {
		id, err := member(d)
		if err != nil {
			return err
		}
		want := []groupOffsetJSON{
			{Topic: topic, Partition: 0, Committed: -1, End: 3, Lag: 3, MemberID: id},
			{Topic: topic, Partition: 1, Committed: -1, End: 0, Lag: 0, MemberID: id},
		}
		if !slices.Equal(d.Offsets, want) {
			return fmt.Errorf("offsets %+v, want %+v", d.Offsets, want)
		}
		return nil
	})
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	describe(func(d describedGroupJSON) error {
		id, err := member(d)
		if err != nil {
			return err
		}
		if len(d.Offsets) != 2 || d.Offsets[0] != (groupOffsetJSON{Topic: topic, Partition: 0, Committed: 3, End: 3, Lag: 0, MemberID: id}) ||
			d.Offsets[1].MemberID != id {
			return fmt.Errorf("offsets after the commit %+v", d.Offsets)
		}
		return nil
	})
}
