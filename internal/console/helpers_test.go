package console_test

import (
	"context"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/group"
	"github.com/strata-stream/strata/internal/server"
	"github.com/strata-stream/strata/internal/vfs"
)

func testLogger() *slog.Logger {
	if os.Getenv("STRATA_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// startNode runs a node on ephemeral loopback ports.
func startNode(t *testing.T) *server.Node {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.KafkaAddr, cfg.HTTPAddr, cfg.ControllerAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.AdvertisedKafkaAddr = ""
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := server.Start(ctx, cfg, testLogger(), vfs.Default)
	if err != nil {
		t.Fatalf("starting node: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func client(t *testing.T, n *server.Node, opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.KafkaAddr())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

// get fetches url and returns the status and body; redirects are not followed.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func mustContain(t *testing.T, what, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Fatalf("%s does not contain %q:\n%s", what, w, body)
		}
	}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// nopStore accepts every append to __consumer_offsets at once (no durability: the
// tests never reload).
type nopStore struct{}

func (nopStore) Append(context.Context, int32, []group.Record) error { return nil }

// newCoordinator returns a group coordinator with its one offsets partition
// loaded, standing in for the broker's until the broker wires its own.
func newCoordinator(t *testing.T) *group.Coordinator {
	t.Helper()
	cfg := group.DefaultConfig()
	cfg.GroupInitialRebalanceDelay = 0
	cfg.OffsetsTopicPartitions = 1
	c := group.New(cfg, nopStore{}, testLogger())
	empty := iter.Seq2[group.Record, error](func(func(group.Record, error) bool) {})
	if err := c.LoadPartition(context.Background(), 0, empty); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// commit makes an admin commit (no member) of offset for every listed partition.
func commit(t *testing.T, c *group.Coordinator, groupID, topic string, offsets map[int32]int64) {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.SetVersion(8)
	req.Group, req.Generation = groupID, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	for p, o := range offsets {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, o, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	for _, t2 := range c.OffsetCommit(context.Background(), req).Topics {
		for _, p := range t2.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("commit %s %s-%d: %v", groupID, topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
		}
	}
}

// joinMember makes one consumer-protocol member join groupID and take partitions
// of topic as its assignment, leaving the group Stable.
func joinMember(t *testing.T, c *group.Coordinator, groupID, topic string, partitions ...int32) {
	t.Helper()
	ctx := group.WithClient(context.Background(), group.Client{ID: "console-test", Host: "/127.0.0.1"})
	join := kmsg.NewPtrJoinGroupRequest()
	join.SetVersion(3)
	join.Group, join.ProtocolType = groupID, "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 60000, 60000
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{topic}
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
	jr := c.JoinGroup(ctx, join)
	if jr.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(jr.ErrorCode))
	}
	asg := kmsg.NewConsumerMemberAssignment()
	asg.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: topic, Partitions: partitions}}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.SetVersion(3)
	sync.Group, sync.Generation, sync.MemberID = groupID, jr.Generation, jr.MemberID
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: asg.AppendTo(nil)}}
	if sr := c.SyncGroup(ctx, sync); sr.ErrorCode != 0 {
		t.Fatalf("sync: %v", kerr.ErrorForCode(sr.ErrorCode))
	}
}

// produce sends n records to topic's partition p (value prefix-i) with acks=all;
// cl must use kgo.ManualPartitioner.
func produce(t *testing.T, cl *kgo.Client, topic string, p int32, prefix string, n int) {
	t.Helper()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: []byte("k"), Value: []byte(prefix + "-" + strconv.Itoa(i)),
			Headers: []kgo.RecordHeader{{Key: "source", Value: []byte("console-test")}}})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}
