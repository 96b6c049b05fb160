package server

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/wait"
)

// TestOpensPreviousMainDataDir starts a node on a data directory written by an
// earlier main, kept as a fixture, and checks that nothing it held is lost.
//
// testdata/datadir-f9b0ffc.tgz was written by `strata server` of main at
// f9b0ffc (2026-11-30; the controller's Raft log in bbolt's raft.db): topic
// orders with 2 partitions and retention.ms=-1, six keyed records k1:v1..k6:v6
// produced with `strata produce --key-separator :`, group billing having
// consumed and committed four of them, then a clean shutdown (SIGTERM).
func TestOpensPreviousMainDataDir(t *testing.T) {
	dir := t.TempDir()
	extractTarGz(t, "testdata/datadir-f9b0ffc.tgz", dir)
	cfg := nodeConfig(filepath.Join(dir, "data"))
	n := startNode(t, cfg)
	cl, adm := n.client(t)
	ctx := t.Context()

	topics, err := adm.ListTopics(ctx, "orders")
	if err != nil || topics["orders"].Err != nil || len(topics["orders"].Partitions) != 2 {
		t.Fatalf("topic orders after the upgrade: %+v, %v", topics["orders"], err)
	}
	configs, err := adm.DescribeTopicConfigs(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := configs.On("orders", nil); err != nil || !hasConfig(c.Configs, "retention.ms", "-1") {
		t.Fatalf("orders' retention.ms after the upgrade: %+v, %v", c, err)
	}

	// The group coordinator answers once the node is unfenced and leads the
	// offsets partition (before, FindCoordinator says COORDINATOR_NOT_AVAILABLE,
	// which franz-go's admin requests do not retry).
	var offsets kadm.OffsetResponses
	wait.Eventually(t, 10*time.Second, "billing's committed offsets", func() error {
		offsets, err = adm.FetchOffsets(ctx, "billing")
		if err == nil {
			err = offsets.Error()
		}
		return err
	})
	for p, want := range map[int32]int64{0: 3, 1: 1} {
		if o, ok := offsets.Lookup("orders", p); !ok || o.At != want {
			t.Fatalf("billing's committed offset of orders-%d: %+v, want %d", p, o, want)
		}
	}

	// Every record reads back, then the log takes new ones after them.
	read := func(want int) []string {
		t.Helper()
		c, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.ConsumeTopics("orders"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var got []string
		for len(got) < want {
			fs := c.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				t.Fatal(err)
			}
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Key)+":"+string(r.Value)) })
		}
		slices.Sort(got)
		return got
	}
	if got, want := read(6), []string{"k1:v1", "k2:v2", "k3:v3", "k4:v4", "k5:v5", "k6:v6"}; !slices.Equal(got, want) {
		t.Fatalf("records after the upgrade: %v, want %v", got, want)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Key: []byte("k7"), Value: []byte("v7")}).FirstErr(); err != nil {
		t.Fatalf("producing after the upgrade: %v", err)
	}
	if got := read(7); !slices.Contains(got, "k7:v7") {
		t.Fatalf("records after a new produce: %v", got)
	}
}

func hasConfig(configs []kadm.Config, name, value string) bool {
	for _, c := range configs {
		if c.Key == name && c.Value != nil && *c.Value == value {
			return true
		}
	}
	return false
}

// extractTarGz unpacks the gzipped tar file at path into dir.
func extractTarGz(t *testing.T, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(out, tr); err != nil {
				t.Fatal(err)
			}
			out.Close()
		}
	}
}
