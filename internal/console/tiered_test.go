package console_test

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/server"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// TestTieredTopicShowsRemoteLogStart: of a tiered topic whose local log no
// longer starts at 0 (its first segments uploaded and deleted locally), the
// topic page shows the partition's log start, 0, as ListOffsets earliest (and
// so Kafka's tools) answers it, and the records page reads the oldest records
// from the object store. The old code showed the local log start and read the
// local log only.
func TestTieredTopicShowsRemoteLogStart(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.KafkaAddr, cfg.HTTPAddr, cfg.ControllerAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.AdvertisedKafkaAddr = ""
	cfg.GroupInitialDelay, cfg.OffsetsTopicPartition = 0, 1
	cfg.RemoteStorage = "file://" + filepath.Join(t.TempDir(), "remote")
	cfg.RemoteUploadInterval, cfg.LogCleanupInterval = 20*time.Millisecond, 20*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := server.Start(ctx, cfg, testLogger(), vfs.Default)
	if err != nil {
		t.Fatalf("starting node: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	cl, adm := client(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	configs := map[string]*string{"remote.storage.enable": new("true"), "local.retention.bytes": new("4096"),
		metadata.TopicInternalSegmentBytes: new("4096")}
	if resp, err := adm.CreateTopic(ctx, 1, 1, configs, "archive"); err != nil || resp.Err != nil {
		t.Fatalf("creating the tiered topic: %v %v", err, resp.Err)
	}
	for i := range 100 { // a batch each: segments roll
		produce(t, cl, "archive", 0, "b"+strconv.Itoa(i), 5)
	}
	wait.For(t, "local retention to delete uploaded segments", func() bool {
		offs, err := adm.ListOffsetsAfterMilli(ctx, -4, "archive") // earliest-local
		return err == nil && offs["archive"][0].Offset > 0
	})
	base := "http://" + n.HTTPAddr() + "/console/topics/archive"
	_, body := get(t, base)
	mustContain(t, "topic page", body, `<td class="num" data-field="logStartOffset">0</td>`)
	_, body = get(t, base+"/records?limit=500")
	mustContain(t, "records page", body, "log start 0 ", ">b0-0<")
}
