package handlers

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/share"
)

// TestReadShareGroupStateSummary: ReadShareGroupStateSummary (87) answers as a
// Kafka 4.4 broker did to the same requests (interop/cmd/sharecompare): state
// found, no state (start offset -1, not an error), an unknown topic id or
// partition, a negative partition, an empty group id (no topics), no
// CLUSTER_ACTION; and NOT_COORDINATOR for a state partition led elsewhere.
func TestReadShareGroupStateSummary(t *testing.T) {
	k := share.Key{Group: "g", TopicID: errTopicID, Partition: 0}
	coord := share.NewCoordinator(fakeStateLog{}, share.DefaultStateTopicPartitions)
	ctx := context.Background()
	if err := coord.LoadPartitionAt(ctx, share.StatePartition(k, share.DefaultStateTopicPartitions), 0, func(func(group.Record, error) bool) {}); err != nil {
		t.Fatal(err)
	}
	// State epoch 1 from offset 4; offsets 4 and 6 done, 5 in flight.
	snap := share.Snapshot{StateEpoch: 1, LeaderEpoch: 3, Start: 4, DeliveryComplete: 2, Batches: []share.StateBatch{
		{First: 4, Last: 4, State: share.Acknowledged, DeliveryCount: 1},
		{First: 5, Last: 5, State: share.Available, DeliveryCount: 1},
		{First: 6, Last: 6, State: share.Archived, DeliveryCount: 2},
	}}
	if code := coord.Initialize(ctx, k, 1, 4); code != 0 {
		t.Fatal(code)
	}
	if code := coord.Write(ctx, k, snap); code != 0 {
		t.Fatal(code)
	}
	// Groups whose key of partition 0 lives in k's state partition, led here.
	near := func(group string) string {
		for n := share.StatePartition(k, share.DefaultStateTopicPartitions); share.StatePartition(share.Key{Group: group, TopicID: errTopicID}, share.DefaultStateTopicPartitions) != n; {
			group += "x"
		}
		return group
	}
	fresh, nogroup := share.Key{Group: near("g-fresh"), TopicID: errTopicID}, near("nogroup")
	if code := coord.Initialize(ctx, fresh, 0, 7); code != 0 { // no leader has read it: leader epoch -1
		t.Fatal(code)
	}
	other := share.Key{Group: "g", TopicID: errTopicID, Partition: 1}
	for share.StatePartition(other, share.DefaultStateTopicPartitions) == share.StatePartition(k, share.DefaultStateTopicPartitions) {
		other.Partition++
	}
	h := newErrorsHandlersWith(t, Config{ShareCoordinator: coord})
	denied := newErrorsHandlersWith(t, Config{ShareCoordinator: coord, Authorizer: allowAnonymous(kmsg.ACLOperationRead, resGroup, "g")})

	// summary renders the answer's partitions as sharecompare does.
	summary := func(h *Handlers, version int16, group string, id [16]byte, partition int32) string {
		req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
		req.SetVersion(version)
		req.GroupID = group
		rt := kmsg.NewReadShareGroupStateSummaryRequestTopic()
		rt.TopicID = id
		rp := kmsg.NewReadShareGroupStateSummaryRequestTopicPartition()
		rp.Partition = partition
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := serveRequest(t, h, &protocol.ConnInfo{}, &protocol.Request{Key: req.Key(), Version: version, Msg: req}).(*kmsg.ReadShareGroupStateSummaryResponse)
		out := ""
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				msg := "<nil>"
				if p.ErrorMessage != nil {
					msg = *p.ErrorMessage
				}
				out += fmt.Sprintf("p%d code %d %q state epoch %d leader epoch %d start %d complete %d;",
					p.Partition, p.ErrorCode, msg, p.StateEpoch, p.LeaderEpoch, p.StartOffset, p.DeliveryCompleteCount)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name, got, want string
	}{
		{"state", summary(h, 1, "g", errTopicID, 0), `p0 code 0 "<nil>" state epoch 1 leader epoch 3 start 4 complete 2;`},
		{"state, v0", summary(h, 0, "g", errTopicID, 0), `p0 code 0 "<nil>" state epoch 1 leader epoch 3 start 4 complete 2;`},
		{"no leader has read it", summary(h, 1, fresh.Group, errTopicID, 0), `p0 code 0 "<nil>" state epoch 0 leader epoch 0 start 7 complete 0;`},
		{"no state", summary(h, 1, nogroup, errTopicID, 0), `p0 code 0 "<nil>" state epoch 0 leader epoch 0 start -1 complete -1;`},
		{"unknown topic id", summary(h, 1, "g", [16]byte{1, 2, 3}, 0), `p0 code 3 "This server does not host this topic-partition." state epoch 0 leader epoch 0 start 0 complete -1;`},
		{"partition 9", summary(h, 1, "g", errTopicID, 9), `p9 code 3 "This server does not host this topic-partition." state epoch 0 leader epoch 0 start 0 complete -1;`},
		{"partition -1", summary(h, 1, "g", errTopicID, -1), `p-1 code 42 "The partition id cannot be a negative number." state epoch 0 leader epoch 0 start 0 complete -1;`},
		{"empty group id", summary(h, 1, "", errTopicID, 0), ``},
		{"no CLUSTER_ACTION", summary(denied, 1, "g", errTopicID, 0), `p0 code 31 "Cluster authorization failed." state epoch 0 leader epoch 0 start 0 complete -1;`},
		{"state partition led elsewhere", summary(h, 1, "g", errTopicID, other.Partition), fmt.Sprintf(`p%d code 16 "This is not the correct coordinator." state epoch 0 leader epoch 0 start 0 complete -1;`, other.Partition)},
	} {
		if tc.got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, tc.got, tc.want)
		}
	}
}
