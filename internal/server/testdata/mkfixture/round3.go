package main

// The items added for the third fixture: a Raft snapshot that holds the
// metadata, a tiered topic read back from its remote store, and a streams
// group (KIP-1071).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// trailingLogs is the number of Raft entries the controller keeps after a
// snapshot (controller.Config.TrailingLogs, hashicorp/raft's TrailingLogs):
// an entry leaves the log only once this many newer ones follow it.
const trailingLogs = 10240

// snapshot pushes the metadata written so far out of the controller's Raft
// log into a snapshot. The binaries it takes may predate the controller's
// snapshot settings (session 18), and even with them a snapshot keeps the
// trailingLogs entries before it, so it writes
// more than trailingLogs entries (quota changes of client id flood, removed
// at the end) and waits for the controller's timer: then the log keeps only
// entries newer than the metadata. It prints the last index of the metadata.
func snapshot(ctx context.Context, admin *kgo.Client, adm *kadm.Client, dataDir string) error {
	written, err := raftHighWatermark(ctx, admin)
	if err != nil {
		return err
	}
	fmt.Printf("metadata up to Raft index %d\n", written)
	target := written + trailingLogs + 500
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for w := range errs {
		wg.Go(func() { errs[w] = flood(ctx, admin, adm, w, target) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := alterQuota(ctx, adm, "flood", nil); err != nil {
		return err
	}
	return until(ctx, "the controller's snapshot", func() error {
		ids, err := snapshotIndexes(dataDir)
		if err == nil && (len(ids) == 0 || slices.Max(ids) < target) {
			err = fmt.Errorf("snapshots at %v", ids)
		}
		return err
	})
}

// flood changes client id flood's quota until the Raft log reaches target.
func flood(ctx context.Context, admin *kgo.Client, adm *kadm.Client, worker int, target uint64) error {
	for i := 1; ; i++ {
		rate := float64(worker*1_000_000 + i)
		if err := alterQuota(ctx, adm, "flood", &rate); err != nil {
			return err
		}
		if i%200 != 0 {
			continue
		}
		hwm, err := raftHighWatermark(ctx, admin)
		if err != nil || hwm >= target {
			return err
		}
	}
}

// alterQuota sets (rate non-nil) or removes client id's producer_byte_rate.
func alterQuota(ctx context.Context, adm *kadm.Client, clientID string, rate *float64) error {
	op := kadm.AlterClientQuotaOp{Key: "producer_byte_rate", Remove: rate == nil}
	if rate != nil {
		op.Value = *rate
	}
	return alterQuotas(ctx, adm, kadm.AlterClientQuotaEntry{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: kadm.StringPtr(clientID)}},
		Ops:    []kadm.AlterClientQuotaOp{op},
	})
}

// raftHighWatermark is the controller's commit index (DescribeQuorum).
func raftHighWatermark(ctx context.Context, admin *kgo.Client) (uint64, error) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, admin)
	if err != nil {
		return 0, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return 0, err
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return 0, err
	}
	return uint64(p.HighWatermark), nil
}

// snapshotIndexes lists the Raft indexes of the controller's snapshots, read
// from their meta.json (the layout of raft's FileSnapshotStore).
func snapshotIndexes(dataDir string) ([]uint64, error) {
	dirs, err := os.ReadDir(filepath.Join(dataDir, "metadata", "snapshots"))
	if err != nil {
		return nil, err
	}
	var ids []uint64
	for _, d := range dirs {
		if strings.HasSuffix(d.Name(), ".tmp") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dataDir, "metadata", "snapshots", d.Name(), "meta.json"))
		if err != nil {
			return nil, err
		}
		var meta struct{ Index uint64 }
		if err := json.Unmarshal(b, &meta); err != nil {
			return nil, err
		}
		ids = append(ids, meta.Index)
	}
	return ids, nil
}

// printSnapshots prints the indexes of the snapshots the stopped node kept.
func printSnapshots(dataDir string) error {
	ids, err := snapshotIndexes(dataDir)
	if err != nil {
		return err
	}
	fmt.Printf("Raft snapshots at indexes %v\n", ids)
	return nil
}

// Archive's records: a0..a11, one batch each, padded so that two batches fill
// a 2048-byte segment.
const archiveRecords = 12

// tiered writes archive's records and waits until every closed segment
// ([0, 10) in five segments) is uploaded and removed from the local log.
func tiered(ctx context.Context, admin *kgo.Client, adm *kadm.Client) error {
	pad := strings.Repeat(".", 800)
	for i := range archiveRecords {
		r := &kgo.Record{Topic: "archive", Key: fmt.Appendf(nil, "a%d", i), Value: fmt.Appendf(nil, "a%d|%s", i, pad)}
		if err := admin.ProduceSync(ctx, r).FirstErr(); err != nil {
			return err
		}
	}
	return until(ctx, "archive's upload and local deletion", func() error {
		local, err := listOffset(ctx, admin, -4) // earliest-local
		if err != nil {
			return err
		}
		tieredEnd, err := listOffset(ctx, admin, -5) // latest-tiered
		if err != nil {
			return err
		}
		if local != 10 || tieredEnd != 9 {
			return fmt.Errorf("earliest-local %d, latest-tiered %d", local, tieredEnd)
		}
		fmt.Printf("archive: local log from %d, tiered up to %d\n", local, tieredEnd)
		return nil
	})
}

// listOffset is ListOffsets of archive-0 at the special timestamp ts.
func listOffset(ctx context.Context, admin *kgo.Client, ts int64) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 9 // -5 latest-tiered (KIP-1005)
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "archive"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp, rp.CurrentLeaderEpoch = ts, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, admin)
	if err != nil {
		return 0, err
	}
	p := resp.Topics[0].Partitions[0]
	return p.Offset, kerr.ErrorForCode(p.ErrorCode)
}

// streamsMember is one member of streams-g as its client keeps it.
type streamsMember struct {
	id    string
	epoch int32
	tasks []kmsg.TaskIDs
}

// streamsGroup writes c0..c3 to clicks (two per partition); streams-g, an
// application of two subtopologies (0 reads clicks, 1 reads orders), gets
// members stream-a and stream-b (processes pa, pb), which heartbeat until
// each owns its share of the four tasks at one group epoch; stream-a then
// commits clicks-0 at 2 and clicks-1 at 1.
func streamsGroup(ctx context.Context, kafka string, admin *kgo.Client) error {
	var recs []*kgo.Record
	for i := range 4 {
		recs = append(recs, &kgo.Record{Topic: "clicks", Partition: int32(i % 2), Value: fmt.Appendf(nil, "c%d", i)})
	}
	producer := client(kafka, adminUser, adminPassword, false, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer producer.Close()
	if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return err
	}
	a, b := &streamsMember{id: "stream-a"}, &streamsMember{id: "stream-b"}
	if err := until(ctx, "streams-g's tasks to settle", func() error {
		for _, m := range []*streamsMember{a, b} {
			if err := streamsHeartbeat(ctx, admin, m); err != nil {
				return err
			}
		}
		if n := countTasks(a.tasks) + countTasks(b.tasks); n != 4 || a.epoch != b.epoch || len(a.tasks) == 0 || len(b.tasks) == 0 {
			return fmt.Errorf("stream-a at %d owns %v, stream-b at %d owns %v", a.epoch, a.tasks, b.epoch, b.tasks)
		}
		return nil
	}); err != nil {
		return err
	}
	topics, err := kadm.NewClient(admin).ListTopics(ctx, "clicks")
	if err != nil {
		return err
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.MemberID, commit.Generation = "streams-g", a.id, a.epoch
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic, ct.TopicID = "clicks", topics["clicks"].ID // v10 names topics by id
	for p, o := range []int64{2, 1} {
		cp := kmsg.NewOffsetCommitRequestTopicPartition()
		cp.Partition, cp.Offset = int32(p), o
		ct.Partitions = append(ct.Partitions, cp)
	}
	commit.Topics = append(commit.Topics, ct)
	resp, err := commit.RequestWith(ctx, admin)
	if err != nil {
		return err
	}
	for _, p := range resp.Topics[0].Partitions {
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			return fmt.Errorf("committing clicks-%d: %w", p.Partition, err)
		}
	}
	fmt.Printf("streams-g: stream-a at %d owns %v, stream-b at %d owns %v\n", a.epoch, a.tasks, b.epoch, b.tasks)
	return nil
}

// streamsHeartbeat sends m's StreamsGroupHeartbeat: a join with the topology
// at epoch 0, else its epoch and the tasks it owns.
func streamsHeartbeat(ctx context.Context, admin *kgo.Client, m *streamsMember) error {
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = "streams-g", m.id, m.epoch
	req.RebalanceTimeoutMillis = -1
	req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = append([]kmsg.TaskIDs{}, m.tasks...), []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	if m.epoch == 0 {
		req.RebalanceTimeoutMillis = 30000
		req.ProcessID = kmsg.StringPtr("p" + strings.TrimPrefix(m.id, "stream-"))
		top := kmsg.NewStreamsGroupHeartbeatRequestTopology()
		for id, topic := range []string{"clicks", "orders"} {
			sub := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
			sub.SubtopologyID, sub.SourceTopics = fmt.Sprint(id), []string{topic}
			top.Subtopologies = append(top.Subtopologies, sub)
		}
		req.Topology = &top
	}
	// Straight to the one node: franz-go does not route streams requests.
	r, err := admin.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return err
	}
	resp := r.(*kmsg.StreamsGroupHeartbeatResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("%s at epoch %d: %w", m.id, m.epoch, err)
	}
	m.epoch = resp.MemberEpoch
	if resp.ActiveTasks != nil {
		m.tasks = resp.ActiveTasks
		slices.SortFunc(m.tasks, func(x, y kmsg.TaskIDs) int { return strings.Compare(x.SubtopologyID, y.SubtopologyID) })
	}
	return nil
}

func countTasks(ts []kmsg.TaskIDs) int {
	n := 0
	for _, t := range ts {
		n += len(t.Partitions)
	}
	return n
}
