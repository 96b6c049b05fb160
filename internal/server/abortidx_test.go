package server

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestReadCommittedAcrossSegments: two franz-go transactional producers
// interleave transactions whose records span 1 MiB segments, aborting some. A
// read_committed consumer sees exactly the committed records: served from the
// segments' aborted-transaction indexes, again after a restart (the indexes
// read from their files), and after the index files were removed while the
// node was down (rebuilt from the log).
func TestReadCommittedAcrossSegments(t *testing.T) {
	ctx := context.Background()
	cfg := nodeConfig(t.TempDir())
	n := startNode(t, cfg)
	_, adm := n.client(t)
	const topic = "aborts"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": kadm.StringPtr("1048576")}, topic); err != nil {
		t.Fatal(err)
	}
	producer := func(id string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic),
			kgo.ProducerBatchCompression(kgo.NoCompression()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	a, b := producer("a"), producer("b")
	pad := strings.Repeat("x", 40<<10)
	var committed []string
	produce := func(cl *kgo.Client, name string, round, i int) string {
		t.Helper()
		v := fmt.Sprintf("%s-%02d-%d", name, round, i)
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v + pad)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		return v
	}
	end := func(cl *kgo.Client, commit bool, values []string) {
		t.Helper()
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
		if commit {
			committed = append(committed, values...)
		}
	}
	const rounds = 16
	for r := range rounds {
		if err := a.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		va := []string{produce(a, "a", r, 0)}
		if err := b.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		vb := []string{produce(b, "b", r, 0)}
		va = append(va, produce(a, "a", r, 1), produce(a, "a", r, 2))
		end(a, r%2 == 1, va)
		vb = append(vb, produce(b, "b", r, 1))
		end(b, r%3 != 0, vb)
	}
	slices.Sort(committed)
	read := func(n *testNode) []string {
		t.Helper()
		got := pollFor(t, n.KafkaAddr(), topic, kgo.ReadCommitted(), len(committed), 60*time.Second)
		for i := range got {
			got[i] = strings.TrimSuffix(got[i], pad)
		}
		return got
	}
	if got := read(n); !slices.Equal(got, committed) {
		t.Fatalf("read_committed consumer saw %v, want %v", got, committed)
	}

	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	var files []string
	err := filepath.WalkDir(cfg.DataDir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".txnindex") && strings.Contains(path, topic) {
			files = append(files, path)
		}
		return err
	})
	if err != nil || len(files) < 3 {
		t.Fatalf("index files of %s: %v, %v; want one per segment, several segments", topic, files, err)
	}
	n = startNode(t, cfg)
	if got := read(n); !slices.Equal(got, committed) {
		t.Fatalf("after a restart: read_committed consumer saw %v, want %v", got, committed)
	}

	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	n = startNode(t, cfg)
	if got := read(n); !slices.Equal(got, committed) {
		t.Fatalf("after the indexes were removed: read_committed consumer saw %v, want %v", got, committed)
	}
}
