package txn

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-stream/strata/internal/group"
)

// TestListFilterDurationAsKafka: ListTransactions' duration filter keeps the
// ids whose transaction start is more than the duration before now, as Kafka
// 4.4's TransactionStateManager.listTransactionStates compares it, whatever
// the state: an id without a start (-1: Empty after InitProducerId) is kept,
// one that started exactly the duration ago is not.
func TestListFilterDurationAsKafka(t *testing.T) {
	const now = 10_000
	for _, tt := range []struct {
		name  string
		state State
		start int64
		want  bool
	}{
		{"ongoing longer", Ongoing, now - 1001, true},
		{"ongoing exactly the duration", Ongoing, now - 1000, false},
		{"ongoing shorter", Ongoing, now - 10, false},
		{"completed, started long ago", CompleteCommit, now - 5000, true},
		{"no start", Empty, -1, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := ListFilter{MinRunningMs: 1000, NowMs: now}
			if got := f.match("tx", Meta{State: tt.state, StartMs: tt.start}); got != tt.want {
				t.Fatalf("match %v, want %v", got, tt.want)
			}
		})
	}
	if !(ListFilter{MinRunningMs: -1, NowMs: now}).match("tx", Meta{State: Ongoing, StartMs: now}) {
		t.Fatal("no duration filter (-1) must keep every id")
	}
}

// TestDescribeEmptyID: DescribeTransactions of the empty transactional id is
// INVALID_REQUEST, as Kafka 4.4's handleDescribeTransactions answers it, not
// TRANSACTIONAL_ID_NOT_FOUND.
func TestDescribeEmptyID(t *testing.T) {
	f := newFixture(t, &memStore{})
	if _, code := f.c.Describe(""); code != kerr.InvalidRequest.Code {
		t.Fatalf("code %d, want INVALID_REQUEST", code)
	}
}

// TestListWhileLoading: ListTransactions is COORDINATOR_LOAD_IN_PROGRESS while
// a partition of __transaction_state is being loaded here, as Kafka 4.4's
// listTransactionStates answers it (an admin client asks again), not a list
// that silently misses that partition's ids.
func TestListWhileLoading(t *testing.T) {
	f := newFixture(t, &memStore{})
	f.c.InitProducerID(context.Background(), "tx", 10000, -1, -1)
	if got, code := f.c.List(ListFilter{MinRunningMs: -1}); code != 0 || len(got) != 1 {
		t.Fatalf("loaded: %d ids, code %d", len(got), code)
	}
	release := make(chan struct{})
	loading := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- f.c.LoadPartitionAt(context.Background(), 1, 0, func(yield func(group.Record, error) bool) {
			close(loading)
			<-release
		})
	}()
	<-loading
	if _, code := f.c.List(ListFilter{MinRunningMs: -1}); code != kerr.CoordinatorLoadInProgress.Code {
		t.Errorf("while partition 1 loads: code %d, want COORDINATOR_LOAD_IN_PROGRESS", code)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, code := f.c.List(ListFilter{MinRunningMs: -1}); code != 0 {
		t.Fatalf("once loaded: code %d", code)
	}
}
