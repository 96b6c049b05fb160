package clustertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/remote"
	"github.com/strata-stream/strata/internal/remote/remotetest"
	"github.com/strata-stream/strata/internal/testcluster"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/interop/report"
)

// Local limits of the tiered topic: 16 KiB segments, 64 KiB of local log.
const (
	tieredSegmentBytes = 16 << 10
	tieredLocalBytes   = 64 << 10
)

// tieredStore is the object store of one TestTieredStorage run.
type tieredStore struct {
	url      string
	down, up func(t testing.TB) // make it unreachable, and back
}

// TestTieredStorage writes far past local retention to a topic with
// remote.storage.enable=true on a three-node cluster, once with a file:// store
// and once with a real S3-compatible server (moto's, scripts/install-s3.sh), and
// checks after each fault that every node's local log stays bounded, ListOffsets
// earliest is 0 while earliest-local has moved on, and every acknowledged
// record reads back from offset 0 (franz-go): after the leader is killed
// (SIGKILL) while uploads run, after leadership moved, and after the object
// store was unreachable for a while (during which writes and local reads went on
// and remote reads answered a retriable error).
func TestTieredStorage(t *testing.T) {
	t.Run("file", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "objects")
		away := dir + ".away"
		runTiered(t, tieredStore{
			url: "file://" + dir,
			// A file where the store's directory was: every operation fails.
			down: func(t testing.TB) {
				if err := os.Rename(dir, away); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(dir, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			},
			up: func(t testing.TB) {
				if err := os.Remove(dir); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(away, dir); err != nil {
					t.Fatal(err)
				}
			},
		})
	})
	t.Run("s3", func(t *testing.T) {
		srv := remotetest.StartS3Server(t)
		runTiered(t, tieredStore{
			url:  srv.NewBucket(t),
			down: srv.Pause, // requests hang, as with a store that is unreachable
			up:   srv.Resume,
		})
	})
}

func runTiered(t *testing.T, store tieredStore) {
	c := testcluster.Start(t, 3, testcluster.WithFlags(
		"--remote-storage", store.url,
		"--remote-upload-interval", "100ms",
		"--log-cleanup-interval", "200ms",
		"--remote-cache-size", "32768", // smaller than what is read back: reads reach the store
	))
	objects, err := remote.Open(store.url, vfs.Default)
	if err != nil {
		t.Fatal(err)
	}
	const topic = "tiered"
	c.CreateTopic(topic, [][]int32{{1, 2, 3}}, map[string]string{
		"remote.storage.enable":  "true",
		"internal.segment.bytes": fmt.Sprint(tieredSegmentBytes),
		"local.retention.bytes":  fmt.Sprint(tieredLocalBytes),
		"min.insync.replicas":    "2",
	})
	// Batches must fit a 16 KiB segment (RECORD_LIST_TOO_LARGE otherwise, as in
	// Kafka); records pile up into large batches during a failover.
	p := startProducer(t, c, "t", topic, kgo.ProducerBatchMaxBytes(8<<10))

	// 1. Far past local retention.
	waitTiered(t, c, topic, objects, 16)
	checkFromZero(t, readAll(t, c, topic).records)

	// 2. Kill -9 of the leader while it uploads (every 100 ms, under load), then
	// a new leader carries on from the manifest.
	cr := killLeader(t, c, topic)
	c.Node(cr.node).Restart()
	since := time.Now()
	waitAcks(t, since, 500, p)
	waitTiered(t, c, topic, objects, 24)
	checkFromZero(t, readAll(t, c, topic).records)

	// 3. The object store unreachable for a while. Writes and local reads go
	// on; remote reads fail retriably.
	store.down(t)
	since = time.Now()
	waitAcks(t, since, 1000, p)
	if code := fetchErrorAt(t, c, topic, 0); code != kerr.KafkaStorageError.Code {
		t.Fatalf("remote fetch with the store down: error %d, want KAFKA_STORAGE_ERROR (retriable)", code)
	}
	store.up(t)
	p.finish(t)
	// Local retention waited while uploads failed; once they catch up every
	// node is bounded again.
	waitTiered(t, c, topic, objects, 24)
	check(t, produced(p), readAll(t, c, topic).records)

	// The leader's /metrics shows the remote part and the failed uploads.
	body := metricsOf(t, c.Leader(topic, 0))
	for _, series := range []string{"strata_remote_log_size_bytes", "strata_remote_upload_lag_bytes", "strata_remote_upload_errors_total"} {
		if !regexp.MustCompile(`(?m)^` + series + `\{partition="0",topic="tiered"\} [0-9]`).Match(body) {
			t.Errorf("/metrics of the leader has no %s for %s-0", series, topic)
		}
	}
	if regexp.MustCompile(`(?m)^strata_remote_log_size_bytes\{partition="0",topic="tiered"\} 0$`).Match(body) {
		t.Error("/metrics shows no remote bytes")
	}
}

// checkFromZero checks, while the producer still runs (so acknowledgements may
// trail the log), that the records read are offsets 0, 1, 2, ... holding the
// producer's values in send order: nothing duplicated or reordered (it is
// idempotent). Values may skip (a send that failed is reported by finish). The
// final check against the acknowledgements comes after the producer stops.
func checkFromZero(t *testing.T, got []report.Consumed) {
	t.Helper()
	last := -1
	for i, r := range got {
		var seq int
		if _, err := fmt.Sscanf(string(r.Value), "t-%d", &seq); err != nil || r.Offset != int64(i) || seq <= last {
			t.Fatalf("record %d read at offset %d holds %q after t-%06d: want offset %d and a later value", i, r.Offset, r.Value, last, i)
		}
		last = seq
	}
	t.Logf("read offsets 0..%d back in order", len(got)-1)
}

// waitTiered waits until ListOffsets earliest of the topic is 0 while
// earliest-local (-4) is above it, the object store holds at least minSegments
// segments, and every running node's local log of the topic is within local
// retention plus two segments (the active one and one being uploaded).
func waitTiered(t *testing.T, c *testcluster.Cluster, topic string, objects remote.Store, minSegments int) {
	t.Helper()
	testcluster.Eventually(t, 90*time.Second, topic+" tiered: bounded locally, complete from 0", func() error {
		earliest, err := listOffset(c, topic, -2)
		if err != nil {
			return err
		}
		local, err := listOffset(c, topic, -4)
		if err != nil {
			return err
		}
		if earliest != 0 || local == 0 {
			return fmt.Errorf("earliest %d, earliest-local %d: want 0 and above 0", earliest, local)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		keys, err := objects.List(ctx, "")
		if err != nil {
			return err
		}
		segments := 0
		for _, k := range keys {
			// One data object per segment: a .seg copy, or, from a file://
			// store on the nodes' filesystem, the linked segment file (.log,
			// beside its .index).
			if strings.HasSuffix(k, ".seg") || strings.HasSuffix(k, ".log") {
				segments++
			}
		}
		if segments < minSegments {
			return fmt.Errorf("the object store holds %d segments, want %d", segments, minSegments)
		}
		for _, n := range c.Nodes() {
			if !n.Running() {
				continue
			}
			b, err := dirBytes(filepath.Join(n.DataDir, "logs", topic+"-0"), ".log")
			if err != nil {
				return err
			}
			if b > tieredLocalBytes+2*tieredSegmentBytes {
				return fmt.Errorf("node %d holds %d bytes of %s locally", n.ID, b, topic)
			}
		}
		return nil
	})
}

// dirBytes sums the sizes of the files below dir whose names end in suffix.
func dirBytes(dir, suffix string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, suffix) {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	return n, err
}

// listOffset asks the cluster for ListOffsets of topic-0 at a special timestamp
// (-2 earliest, -4 earliest-local).
func listOffset(c *testcluster.Cluster, topic string, ts int64) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = 0, ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	leader := c.Leader(topic, 0)
	if leader == nil {
		return 0, errors.New("no leader")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := leader.Request(ctx, req)
	if err != nil {
		return 0, err
	}
	ts0 := resp.(*kmsg.ListOffsetsResponse).Topics
	if len(ts0) != 1 || len(ts0[0].Partitions) != 1 {
		return 0, errors.New("malformed ListOffsets answer")
	}
	sp := ts0[0].Partitions[0]
	if err := kerr.ErrorForCode(sp.ErrorCode); err != nil {
		return 0, err
	}
	return sp.Offset, nil
}

// fetchErrorAt fetches topic-0 at offset from its leader and returns the
// partition's error code.
func fetchErrorAt(t *testing.T, c *testcluster.Cluster, topic string, offset int64) int16 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topics, err := c.Admin().ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MaxBytes = -1, 100, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, topics[topic].ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, offset, 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := c.Leader(topic, 0).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	fr := resp.(*kmsg.FetchResponse)
	if fr.ErrorCode != 0 {
		return fr.ErrorCode
	}
	return fr.Topics[0].Partitions[0].ErrorCode
}
