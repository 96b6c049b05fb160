package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/controller/raftstore"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// round3Fixture was written by `strata server` of main at e7b323d
// (2026-12-03) through testdata/mkfixture. It holds everything round2Fixture
// lists (the same steps, run in another order) and:
//
//   - the controller's Raft log compacted into a snapshot: the metadata
//     (topics, their configs, the deleted topic, SCRAM users, ACLs, the
//     delegation token, quotas) lies at Raft indexes 1..43, then quota changes of
//     client id flood (removed again) filled the log to past 10,240 more
//     entries: the snapshot at index 11228 holds the metadata, the log starts
//     above it.
//   - archive (remote.storage.enable=true, internal.segment.bytes=2048,
//     local.retention.bytes=1): a0..a11, one batch each, padded to two per
//     segment; [0, 10) uploaded to the file:// store in remote/ (as linked
//     .log and .index objects, the store being on the data dir's filesystem)
//     and removed from the local log.
//   - clicks (2 partitions): c0..c3, c0 and c2 in partition 0.
//   - streams-g (KIP-1071): subtopology 0 reads clicks, 1 reads orders;
//     members stream-a (process pa) and stream-b (pb) own two tasks each at
//     the group's epoch; clicks-0 and clicks-1 committed at 2 and 1.
const round3Fixture = "testdata/datadir-e7b323d.tgz"

// round3MetadataEnd is the Raft index of the fixture's last metadata entry
// before the flood (mkfixture printed it).
const round3MetadataEnd = 43

// round3TopicIDs are the topic ids mkfixture printed.
var round3TopicIDs = map[string]string{
	"__consumer_offsets":  "76194216703f424186bf1b178f18e2d0",
	"__share_group_state": "8c9c2aeb81f14f3790124a9f98636ad3",
	"__transaction_state": "be8299fbc6ec4d1caeaa4a067b269ab6",
	"archive":             "a97d132579a64073a2535b1c716a977b",
	"clicks":              "cf4676e430ef4e7e8bc7bedc6c9ed771",
	"orders":              "f6faf7f6198f40ca85dcdd7bfb303dca",
	"payments":            "81a4fd218ae54704a388fd3f90fbd98f",
	"profiles":            "40a927fcb8364121af5aead742ef6313",
	"tasks":               "274ae2fdd56f4626b5ecd848a3a43206",
}

// round3Config is the configuration the fixture's node ran with, its remote
// store where the fixture was extracted (root/remote).
func round3Config(root string) config.Config {
	cfg := round2Config(filepath.Join(root, "data"))
	cfg.RemoteStorage = "file://" + filepath.Join(root, "remote")
	return cfg
}

// TestOpensRound3DataDir opens the data directory main wrote at e7b323d with
// the new code and checks, beside every item of round 2, the metadata the
// controller restores from its Raft snapshot, the tiered topic's remote part
// and the streams group.
func TestOpensRound3DataDir(t *testing.T) {
	checkRound3Fixture(t, round3Fixture, fixtureFacts{topicIDs: round3TopicIDs, written: time.Date(2026, time.December, 3, 0, 0, 0, 0, time.UTC), modernGroup: "classic"}, nil)
}

// groupCheck checks a group of a fixture after the upgrade.
type groupCheck func(t *testing.T, ctx context.Context, admin *kgo.Client, adm *kadm.Client)

// checkRound3Fixture opens fixture, a data directory with round3Fixture's
// contents (and maybe more) and facts f, and checks every item of round 3; groups checks the fixture's further groups first, with the
// streams group, within their members' session timeout from the load.
func checkRound3Fixture(t *testing.T, fixture string, f fixtureFacts, groups map[string]groupCheck) {
	root := t.TempDir()
	extractTarGz(t, fixture, root)
	dataDir := filepath.Join(root, "data")
	checkRound3RaftLog(t, filepath.Join(dataDir, "metadata"))
	n := startNode(t, round3Config(root))
	admin, adm := n.client(t, scramAuth("admin", "admin-secret", false))
	ctx := t.Context()
	for name, check := range groups {
		t.Run(name, func(t *testing.T) { check(t, ctx, admin, adm) })
	}
	t.Run("streams group", func(t *testing.T) { checkRound3StreamsGroup(t, ctx, admin, adm) })
	t.Run("tiered", func(t *testing.T) { checkRound3Tiered(t, ctx, n, admin, root, f.topicIDs["archive"]) })
	checkRound2(t, n, dataDir, f)
	t.Run("new topic", func(t *testing.T) { checkRound3NewTopic(t, ctx, adm) })
}

// checkRound3RaftLog: before the node starts, the fixture's Raft log begins
// after the metadata entries and a snapshot covers them, so the metadata the
// round-2 checks find came from the snapshot.
func checkRound3RaftLog(t *testing.T, dir string) {
	wal, err := raftstore.OpenWAL(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	first, err := wal.FirstIndex()
	wal.Close()
	if err != nil || first <= round3MetadataEnd {
		t.Fatalf("the fixture's Raft log starts at %d (%v), want after the metadata's last index %d", first, err, round3MetadataEnd)
	}
	snaps, err := raftstore.OpenSnapshots(vfs.Default, dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	metas, err := snaps.List()
	if err != nil || len(metas) == 0 || metas[0].Index+1 < first {
		t.Fatalf("the fixture's snapshots %+v (%v) do not reach its log's start %d", metas, err, first)
	}
}

// checkRound3NewTopic: the image restored from the snapshot takes a new topic.
func checkRound3NewTopic(t *testing.T, ctx context.Context, adm *kadm.Client) {
	created, err := adm.CreateTopic(ctx, 1, 1, nil, "after-upgrade")
	if err != nil || created.Err != nil {
		t.Fatalf("creating a topic after the upgrade: %v %v", err, created.Err)
	}
	topics, err := adm.ListTopics(ctx, "after-upgrade")
	if err != nil || topics["after-upgrade"].Err != nil || topics["after-upgrade"].ID != created.ID {
		t.Fatalf("the new topic after the upgrade: %+v, %v", topics["after-upgrade"], err)
	}
}

// checkRound3Tiered: archive's (topic id archiveID) local log starts at 10; a
// fetch from offset 0 is served from the remote store, byte for byte the
// batches stored there, and every record reads back.
func checkRound3Tiered(t *testing.T, ctx context.Context, n *testNode, admin *kgo.Client, root, archiveID string) {
	// At once, before the leader's first tiering pass: a new tier reads the
	// manifest before it answers.
	if got := listArchiveOffset(t, ctx, admin, -2); got != 0 {
		t.Fatalf("archive's earliest offset after the upgrade: %d, want 0", got)
	}
	if got := listArchiveOffset(t, ctx, admin, -4); got != 10 {
		t.Fatalf("archive's earliest local offset after the upgrade: %d, want 10", got)
	}
	objects, err := filepath.Glob(filepath.Join(root, "remote", "archive-*", "0", "*.log"))
	if err != nil || len(objects) != 5 {
		t.Fatalf("archive's remote segments: %v (%v), want 5", objects, err)
	}
	var stored []byte
	for _, o := range objects { // named by base offset, zero-padded: in order
		b, err := os.ReadFile(o)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, b...)
	}
	id, err := hex.DecodeString(archiveID)
	if err != nil {
		t.Fatal(err)
	}
	if fetched := fetchBatches(t, ctx, admin, "archive", [16]byte(id), 10); !bytes.Equal(fetched, stored) {
		t.Fatalf("archive's batches [0, 10) fetched after the upgrade (%d bytes) differ from the remote store's (%d bytes)", len(fetched), len(stored))
	}
	var want []string
	for i := range 12 {
		want = append(want, fmt.Sprintf("%d a%d:a%d", i, i, i))
	}
	if got := readAll(t, ctx, n, "archive", 0, 11); !slices.Equal(got, want) {
		t.Fatalf("archive after the upgrade: %v, want %v", got, want)
	}
}

// listArchiveOffset is ListOffsets of archive-0 at the special timestamp ts.
func listArchiveOffset(t *testing.T, ctx context.Context, admin *kgo.Client, ts int64) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "archive"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp, rp.CurrentLeaderEpoch = ts, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		t.Fatalf("ListOffsets %d of archive-0: %v", ts, err)
	}
	return p.Offset
}

// fetchBatches fetches partition 0 of topic from offset 0 and returns the
// raw bytes of its batches below end.
func fetchBatches(t *testing.T, ctx context.Context, admin *kgo.Client, topic string, id [16]byte, end int64) []byte {
	t.Helper()
	var got []byte
	for next := int64(0); next < end; {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MaxBytes = -1, 500, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes, rp.LogStartOffset, rp.CurrentLeaderEpoch = next, 1<<20, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			t.Fatalf("fetching %s-0 at %d: %v", topic, next, err)
		}
		before := next
		for b := p.RecordBatches; len(b) >= 12 && next < end; {
			size := 12 + int(binary.BigEndian.Uint32(b[8:12])) // base offset, length, then the rest
			if size > len(b) {
				break // a partial batch at the end of the response
			}
			var batch kmsg.RecordBatch
			if err := batch.ReadFrom(b[:size]); err != nil {
				t.Fatalf("fetched batch at %d: %v", next, err)
			}
			got = append(got, b[:size]...)
			next = batch.FirstOffset + int64(batch.LastOffsetDelta) + 1
			b = b[size:]
		}
		if next == before {
			t.Fatalf("fetching %s-0 at %d returned no whole batch", topic, next)
		}
	}
	return got
}

// round3StreamsEpoch is streams-g's epoch when the node stopped, and
// round3StreamsTasks each member's active tasks then (mkfixture printed them).
const round3StreamsEpoch = 2

var round3StreamsTasks = map[string][]kmsg.TaskIDs{
	"stream-a": {{SubtopologyID: "0", Partitions: []int32{0}}, {SubtopologyID: "1", Partitions: []int32{0}}},
	"stream-b": {{SubtopologyID: "0", Partitions: []int32{1}}, {SubtopologyID: "1", Partitions: []int32{1}}},
}

// checkRound3StreamsGroup: streams-g is described as it was (Stable, its
// topology, each member's epoch, process and tasks), its offsets are kept,
// stream-b heartbeats on at its epoch, and stream-a, rejoining as a restarted
// process does (epoch 0, its member id), gets its tasks back.
func checkRound3StreamsGroup(t *testing.T, ctx context.Context, admin *kgo.Client, adm *kadm.Client) {
	var g kmsg.StreamsGroupDescribeResponseGroup
	wait.Eventually(t, 30*time.Second, "streams-g's description", func() error {
		req := kmsg.NewPtrStreamsGroupDescribeRequest()
		req.Groups = []string{"streams-g"}
		resp, err := admin.SeedBrokers()[0].Request(ctx, req) // franz-go does not route streams requests
		if err != nil {
			return err
		}
		g = resp.(*kmsg.StreamsGroupDescribeResponse).Groups[0]
		return kerr.ErrorForCode(g.ErrorCode)
	})
	if g.State != "Stable" || g.Epoch != round3StreamsEpoch || g.AssignmentEpoch != round3StreamsEpoch {
		t.Fatalf("streams-g after the upgrade: %s at epoch %d (assignment %d), want Stable at %d", g.State, g.Epoch, g.AssignmentEpoch, round3StreamsEpoch)
	}
	var topology []string
	if g.Topology != nil {
		for _, sub := range g.Topology.Subtopologies {
			topology = append(topology, fmt.Sprintf("%s:%v", sub.SubtopologyID, sub.SourceTopics))
		}
	}
	if want := []string{"0:[clicks]", "1:[orders]"}; g.Topology == nil || g.Topology.Epoch != 0 || !slices.Equal(topology, want) {
		t.Fatalf("streams-g's topology after the upgrade: %v, want %v at epoch 0", topology, want)
	}
	members := map[string]string{}
	for _, m := range g.Members {
		members[m.MemberID] = fmt.Sprintf("epoch %d process %s tasks %s target %s", m.MemberEpoch, m.ProcessID,
			formatTasks(m.Assignment.ActiveTasks), formatTasks(m.TargetAssignment.ActiveTasks))
	}
	want := map[string]string{}
	for id, tasks := range round3StreamsTasks {
		want[id] = fmt.Sprintf("epoch %d process p%s tasks %s target %s", round3StreamsEpoch, strings.TrimPrefix(id, "stream-"), formatTasks(tasks), formatTasks(tasks))
	}
	if fmt.Sprint(members) != fmt.Sprint(want) {
		t.Fatalf("streams-g's members after the upgrade:\n%v\nwant\n%v", members, want)
	}

	offsets, err := adm.FetchOffsets(ctx, "streams-g")
	if err == nil {
		err = offsets.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range []int64{2, 1} {
		if o, ok := offsets.Lookup("clicks", int32(p)); !ok || o.At != want {
			t.Fatalf("streams-g's committed offset of clicks-%d: %+v, want %d", p, o, want)
		}
	}

	b := streamsHeartbeat(t, ctx, admin, "stream-b", round3StreamsEpoch, round3StreamsTasks["stream-b"])
	if b.ErrorCode != 0 || b.MemberEpoch != round3StreamsEpoch || b.ActiveTasks != nil && formatTasks(b.ActiveTasks) != formatTasks(round3StreamsTasks["stream-b"]) {
		t.Fatalf("stream-b's heartbeat after the upgrade: error %d, epoch %d, tasks %s", b.ErrorCode, b.MemberEpoch, formatTasks(b.ActiveTasks))
	}
	a := streamsHeartbeat(t, ctx, admin, "stream-a", 0, nil)
	if want := formatTasks(round3StreamsTasks["stream-a"]); a.ErrorCode != 0 || formatTasks(a.ActiveTasks) != want {
		t.Fatalf("stream-a rejoining after the upgrade: error %d, epoch %d, tasks %s, want %s", a.ErrorCode, a.MemberEpoch, formatTasks(a.ActiveTasks), want)
	}
}

// streamsHeartbeat sends member id's StreamsGroupHeartbeat to streams-g: at
// epoch 0 a join with the fixture's topology, else with the tasks it owns.
func streamsHeartbeat(t *testing.T, ctx context.Context, admin *kgo.Client, id string, epoch int32, tasks []kmsg.TaskIDs) *kmsg.StreamsGroupHeartbeatResponse {
	t.Helper()
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = "streams-g", id, epoch, -1
	req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = append([]kmsg.TaskIDs{}, tasks...), []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	if epoch == 0 {
		req.RebalanceTimeoutMillis = 30000
		req.ProcessID = kmsg.StringPtr("p" + strings.TrimPrefix(id, "stream-"))
		top := kmsg.NewStreamsGroupHeartbeatRequestTopology()
		for id, topic := range []string{"clicks", "orders"} {
			sub := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
			sub.SubtopologyID, sub.SourceTopics = fmt.Sprint(id), []string{topic}
			top.Subtopologies = append(top.Subtopologies, sub)
		}
		req.Topology = &top
	}
	resp, err := admin.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.StreamsGroupHeartbeatResponse)
}

// formatTasks writes tasks as "subtopology:[partitions] ...", sorted.
func formatTasks(tasks []kmsg.TaskIDs) string {
	var parts []string
	for _, ts := range tasks {
		ps := slices.Sorted(slices.Values(ts.Partitions))
		parts = append(parts, fmt.Sprintf("%s:%v", ts.SubtopologyID, ps))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}
