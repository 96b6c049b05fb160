package handlers

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/txn"
)

// imageCluster is a Cluster that only has an image.
type imageCluster struct {
	Cluster
	img *metadata.Image
}

func (c imageCluster) Image() *metadata.Image { return c.img }

// busyCoordinator answers CONCURRENT_TRANSACTIONS to the first busy adds, then
// 0, as a coordinator still completing a producer's previous transaction does.
type busyCoordinator struct {
	Transactions
	busy  int
	calls int
}

func (b *busyCoordinator) AddPartitions(context.Context, string, int64, int16, []txn.TopicPartition) int16 {
	b.calls++
	if b.calls <= b.busy {
		return kerr.ConcurrentTransactions.Code
	}
	return 0
}

func (b *busyCoordinator) PartitionFor(string) int32 { return 0 }

// TestJoinTxnRetriesConcurrentTransactions: an implicit add that meets the
// completion of the previous transaction is retried on the broker, within
// joinTxnRetryMax, as Kafka does; a coordinator that stays busy gets its code
// back once the window is spent.
func TestJoinTxnRetriesConcurrentTransactions(t *testing.T) {
	id := metadata.UUID{1}
	img, err := metadata.ApplyAll(metadata.NewImage(), []metadata.Record{
		&metadata.TopicRecord{Name: txn.StateTopic, ID: id},
		&metadata.PartitionRecord{TopicID: id, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	tps := []txn.TopicPartition{{Topic: "t", Partition: 0}}
	for _, tc := range []struct {
		name      string
		busy      int
		wantCode  int16
		wantCalls func(int) bool
	}{
		{"free at once", 0, 0, func(n int) bool { return n == 1 }},
		{"busy twice", 2, 0, func(n int) bool { return n == 3 }},
		{"busy throughout", 1000, kerr.ConcurrentTransactions.Code, func(n int) bool {
			return n > 1 && n <= int(joinTxnRetryMax/joinTxnRetryBackoff)+1
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			coord := &busyCoordinator{busy: tc.busy}
			h := New(Config{NodeID: 1, Transactions: coord}, imageCluster{img: img}, nil, nil, nil, slog.New(slog.DiscardHandler))
			start := time.Now()
			code := h.joinTxn(t.Context(), "tx", 7, 0, tps)
			if code != tc.wantCode || !tc.wantCalls(coord.calls) {
				t.Fatalf("code %d after %d calls, want %d", code, coord.calls, tc.wantCode)
			}
			if took := time.Since(start); tc.busy > 0 && took < time.Duration(min(tc.busy, coord.calls-1))*joinTxnRetryBackoff {
				t.Fatalf("%d retries took only %s: no backoff", coord.calls-1, took)
			}
		})
	}
}
