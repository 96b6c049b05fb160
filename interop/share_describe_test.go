package interop

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/testcluster"
	"github.com/strata-stream/strata/interop/kafkatools"
)

// TestKafkaShareGroupsDescribe runs Kafka 4.4's kafka-share-groups --describe
// --members, --state and --offsets (each also --verbose) against one Strata node
// while a share group has members, and checks every row against what the
// group is:
//
//  1. A topic of two partitions, five records on partition 0, the group
//     starting at the earliest offset.
//  2. Two members (franz-go's ShareGroupHeartbeat, a heartbeat a second) until
//     ShareGroupDescribe shows the group Stable, each member with one partition
//     at the assignment epoch.
//  3. The member holding partition 0 acquires and accepts its five records.
//  4. --members: each member's id, host, client id, partition and epoch;
//     --state: the coordinator, Stable, the group and assignment epochs, two
//     members; --offsets: start offset 5 and lag 0 on partition 0, "-" on
//     partition 1 (no state).
//
// Kafka 4.4 prints the same rows for the same steps (run against a Kafka node
// side by side), except start offset 0 on partition 0: it writes the share
// state before it moves the start offset (docs/protocol.md); the lag is 0 in both.
func TestKafkaShareGroupsDescribe(t *testing.T) {
	if os.Getenv(envTarget) == "kfake" {
		t.Skip("share groups run on Strata; not with STRATA_INTEROP_TARGET=kfake")
	}
	kafkatools.Require(t)
	tgt := startTarget(t)
	const topic, group, clientID = "share-describe", "share-describe-group", "share-describe-client"
	members := []string{"member-one", "member-two"}
	adm := newAdmin(t, tgt.bootstrap)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	produceAt(t, tgt.bootstrap, topic, 0, 5, time.Now())
	setGroupConfig(t, []string{tgt.bootstrap}, group, "share.auto.offset.reset", "earliest")

	cl, err := kgo.NewClient(kgo.SeedBrokers(tgt.bootstrap), kgo.ClientID(clientID))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	hb := newShareBeater(cl, group, topic)
	beatCtx, stopBeats := context.WithCancel(ctx)
	var beats sync.WaitGroup
	beats.Add(1)
	go func() {
		defer beats.Done()
		hb.run(beatCtx, members)
	}()
	defer beats.Wait()
	defer stopBeats()

	// 2. Stable: every member at the assignment epoch with one partition.
	var desc kmsg.ShareGroupDescribeResponseGroup
	testcluster.Eventually(t, time.Minute, "two members with a partition each", func() error {
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.GroupIDs = []string{group}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		g := resp.Groups[0]
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return err
		}
		if g.GroupState != "Stable" || len(g.Members) != 2 || g.AssignmentEpoch != g.GroupEpoch {
			return fmt.Errorf("state %s, %d members, group epoch %d, assignment epoch %d", g.GroupState, len(g.Members), g.GroupEpoch, g.AssignmentEpoch)
		}
		for _, m := range g.Members {
			if m.MemberEpoch != g.AssignmentEpoch || len(m.Assignment.TopicPartitions) != 1 || len(m.Assignment.TopicPartitions[0].Partitions) != 1 {
				return fmt.Errorf("member %s at epoch %d with %v", m.MemberID, m.MemberEpoch, m.Assignment.TopicPartitions)
			}
		}
		desc = g
		return nil
	})
	holder := map[int32]string{}
	for _, m := range desc.Members {
		holder[m.Assignment.TopicPartitions[0].Partitions[0]] = m.MemberID
	}
	if len(holder) != 2 {
		t.Fatalf("the members share a partition: %v", holder)
	}

	// 3. The holder of partition 0 takes and accepts the five records.
	topicID := desc.Members[0].Assignment.TopicPartitions[0].TopicID
	acceptAll(t, ctx, cl, group, holder[0], topicID, 5)

	run := func(args ...string) string {
		t.Helper()
		return kafkatools.MustRun(t, "kafka-share-groups", append(append([]string{"--describe", "--group", group}, args...), "--bootstrap-server", tgt.bootstrap)...)
	}
	expect := func(what, out string, rows ...string) {
		t.Helper()
		for _, row := range rows {
			if !regexp.MustCompile(`(?m)^` + row + `\s*$`).MatchString(out) {
				t.Errorf("%s lacks a row %q:\n%s", what, row, out)
			}
		}
	}
	// 4. The tool's rows.
	var rows, verboseRows []string
	for p, id := range holder {
		rows = append(rows, fmt.Sprintf(`%s\s+%s\s+/127\.0\.0\.1\s+%s\s+1\s+%s:%d`, group, id, clientID, topic, p))
		verboseRows = append(verboseRows, fmt.Sprintf(`%s\s+%s\s+/127\.0\.0\.1\s+%s\s+1\s+%d\s+%s:%d`, group, id, clientID, desc.AssignmentEpoch, topic, p))
	}
	expect("--describe --members", run("--members"), rows...)
	expect("--describe --members --verbose", run("--members", "--verbose"), verboseRows...)
	coordinator := regexp.QuoteMeta(tgt.bootstrap) + `\s+\(1\)`
	expect("--describe --state", run("--state"), fmt.Sprintf(`%s\s+%s\s+Stable\s+2`, group, coordinator))
	expect("--describe --state --verbose", run("--state", "--verbose"),
		fmt.Sprintf(`%s\s+%s\s+Stable\s+%d\s+%d\s+2`, group, coordinator, desc.GroupEpoch, desc.AssignmentEpoch))
	expect("--describe --offsets", run("--offsets"),
		fmt.Sprintf(`%s\s+%s\s+0\s+5\s+0`, group, topic), fmt.Sprintf(`%s\s+%s\s+1\s+-\s+-`, group, topic))
	expect("--describe --offsets --verbose", run("--offsets", "--verbose"),
		fmt.Sprintf(`%s\s+%s\s+0\s+0\s+5\s+0`, group, topic), fmt.Sprintf(`%s\s+%s\s+1\s+-\s+-\s+-`, group, topic))
	if err := hb.err(); err != nil {
		t.Errorf("a heartbeat failed: %v", err)
	}
}

// shareBeater keeps share-group members in a group with a heartbeat a second.
type shareBeater struct {
	cl           *kgo.Client
	group, topic string
	mu           struct {
		sync.Mutex
		epochs  map[string]int32
		lastErr error
	}
}

func newShareBeater(cl *kgo.Client, group, topic string) *shareBeater {
	b := &shareBeater{cl: cl, group: group, topic: topic}
	b.mu.epochs = map[string]int32{}
	return b
}

func (b *shareBeater) run(ctx context.Context, members []string) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		for _, m := range members {
			b.beat(ctx, m)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (b *shareBeater) beat(ctx context.Context, member string) {
	b.mu.Lock()
	epoch := b.mu.epochs[member]
	b.mu.Unlock()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch = b.group, member, epoch
	if epoch == 0 {
		req.SubscribedTopicNames = []string{b.topic}
	}
	resp, err := req.RequestWith(ctx, b.cl)
	if ctx.Err() != nil {
		return
	}
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		b.mu.lastErr = fmt.Errorf("%s: %w", member, err)
		return
	}
	b.mu.epochs[member] = resp.MemberEpoch
}

func (b *shareBeater) err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.lastErr
}

// acceptAll has member acquire n records of partition 0 of the topic with
// ShareFetch and accept them with ShareAcknowledge.
func acceptAll(t *testing.T, ctx context.Context, cl *kgo.Client, group, member string, topicID [16]byte, n int) {
	t.Helper()
	fetch := kmsg.NewPtrShareFetchRequest()
	fetch.GroupID, fetch.MemberID = &group, &member
	fetch.MaxWaitMillis, fetch.MinBytes, fetch.MaxBytes, fetch.MaxRecords, fetch.BatchSize = 5000, 1, 1<<20, int32(n), int32(n)
	ft := kmsg.NewShareFetchRequestTopic()
	ft.TopicID = topicID
	ft.Partitions = []kmsg.ShareFetchRequestTopicPartition{kmsg.NewShareFetchRequestTopicPartition()}
	fetch.Topics = append(fetch.Topics, ft)
	ack := kmsg.NewPtrShareAcknowledgeRequest()
	ack.GroupID, ack.MemberID, ack.ShareSessionEpoch = &group, &member, 1
	at := kmsg.NewShareAcknowledgeRequestTopic()
	at.TopicID = topicID
	ap := kmsg.NewShareAcknowledgeRequestTopicPartition()
	acquired := 0
	testcluster.Eventually(t, 30*time.Second, fmt.Sprintf("%d records acquired", n), func() error {
		resp, err := fetch.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return err
		}
		fetch.ShareSessionEpoch++
		for _, tp := range resp.Topics {
			for _, p := range tp.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return err
				}
				for _, r := range p.AcquiredRecords {
					b := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
					b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = r.FirstOffset, r.LastOffset, []int8{1} // accept
					ap.AcknowledgementBatches = append(ap.AcknowledgementBatches, b)
					acquired += int(r.LastOffset - r.FirstOffset + 1)
				}
			}
		}
		if acquired < n {
			return fmt.Errorf("%d acquired", acquired)
		}
		return nil
	})
	ack.ShareSessionEpoch = fetch.ShareSessionEpoch
	at.Partitions = append(at.Partitions, ap)
	ack.Topics = append(ack.Topics, at)
	resp, err := ack.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatal(err)
	}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				t.Fatalf("accepting: %v", err)
			}
		}
	}
}
