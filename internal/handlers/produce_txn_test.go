package handlers

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRetryConcurrentTxn: an implicit add answered CONCURRENT_TRANSACTIONS (the
// previous transaction's markers not yet written) is retried on the broker within
// its bound, so the produce succeeds once the coordinator is ready; other answers
// come back at once, and the bound and the request's context end the retries.
// With a coordinator on another broker (no completion signal) the retries poll.
func TestRetryConcurrentTxn(t *testing.T) {
	concurrent := kerr.ConcurrentTransactions.Code
	for _, tc := range []struct {
		name     string
		answers  []int16 // the coordinator's answers, the last one repeated
		max      time.Duration
		canceled bool
		want     int16
		calls    int
	}{
		{"ready", []int16{0}, 100 * time.Millisecond, false, 0, 1},
		{"markers written during the retry", []int16{concurrent, concurrent, 0}, 100 * time.Millisecond, false, 0, 3},
		{"fenced at once", []int16{kerr.ProducerFenced.Code}, 100 * time.Millisecond, false, kerr.ProducerFenced.Code, 1},
		{"no retry without a bound", []int16{concurrent, 0}, 0, false, concurrent, 1},
		{"bound reached", []int16{concurrent}, 15 * time.Millisecond, false, concurrent, 2},
		{"request canceled", []int16{concurrent, 0}, time.Second, true, concurrent, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.canceled {
				cancel()
			}
			calls := 0
			got := retryConcurrentTxn(ctx, 10*time.Millisecond, tc.max, func() int16 {
				calls++
				return tc.answers[min(calls, len(tc.answers))-1]
			}, func() <-chan struct{} { return nil })
			if got != tc.want || calls != tc.calls {
				t.Fatalf("answered %d after %d calls, want %d after %d", got, calls, tc.want, tc.calls)
			}
		})
	}
}

// TestRetryConcurrentTxnWakesOnCompletion: with the coordinator on this broker,
// the retry waits for its signal that the previous transaction is complete and
// then tries once more; it does not poll (the backoff here is an hour, so a
// polling retry would never get to its second call), and a signal that never
// comes ends at the bound.
func TestRetryConcurrentTxnWakesOnCompletion(t *testing.T) {
	concurrent := kerr.ConcurrentTransactions.Code
	ctx := context.Background()

	complete := make(chan struct{})
	calls := 0
	got := retryConcurrentTxn(ctx, time.Hour, time.Minute, func() int16 {
		calls++
		select {
		case <-complete:
			return 0
		default:
			return concurrent
		}
	}, func() <-chan struct{} {
		if calls == 1 {
			time.AfterFunc(20*time.Millisecond, func() { close(complete) }) // the markers land meanwhile
		}
		return complete
	})
	if got != 0 || calls != 2 {
		t.Fatalf("answered %d after %d calls, want 0 after 2", got, calls)
	}

	// The signal never comes: the bound ends the wait, and one last call.
	calls = 0
	start := time.Now()
	got = retryConcurrentTxn(ctx, time.Hour, 50*time.Millisecond, func() int16 { calls++; return concurrent },
		func() <-chan struct{} { return make(chan struct{}) })
	if got != concurrent || calls != 2 || time.Since(start) > 30*time.Second {
		t.Fatalf("answered %d after %d calls in %v, want %d after 2 at the bound", got, calls, time.Since(start), concurrent)
	}

	// Complete already, yet still CONCURRENT_TRANSACTIONS: one immediate retry,
	// then polling at the backoff, not a spin.
	calls = 0
	closed := make(chan struct{})
	close(closed)
	got = retryConcurrentTxn(ctx, 10*time.Millisecond, 100*time.Millisecond, func() int16 { calls++; return concurrent },
		func() <-chan struct{} { return closed })
	if got != concurrent || calls < 2 || calls > 22 {
		t.Fatalf("answered %d after %d calls, want %d after 2-22 (at most two per 10 ms backoff)", got, calls, concurrent)
	}
}

// TestTxnProduceCode: what each Produce version answers when the coordinator
// did not confirm a transactional batch's partition, as Kafka 4.4 answers:
// CONCURRENT_TRANSACTIONS reaches v12 clients (KAFKA-18662) and is
// NOT_ENOUGH_REPLICAS before; TRANSACTION_ABORTABLE reaches v11+ and is
// INVALID_TXN_STATE before.
func TestTxnProduceCode(t *testing.T) {
	for _, tc := range []struct {
		code    *kerr.Error
		version int16
		want    *kerr.Error
	}{
		{kerr.ConcurrentTransactions, 12, kerr.ConcurrentTransactions},
		{kerr.ConcurrentTransactions, 11, kerr.NotEnoughReplicas},
		{kerr.ConcurrentTransactions, 3, kerr.NotEnoughReplicas},
		{kerr.NotCoordinator, 12, kerr.NotEnoughReplicas},
		{kerr.CoordinatorNotAvailable, 11, kerr.NotEnoughReplicas},
		{kerr.CoordinatorLoadInProgress, 9, kerr.NotEnoughReplicas},
		{kerr.NetworkException, 11, kerr.NotEnoughReplicas},
		{kerr.ProducerFenced, 12, kerr.InvalidProducerEpoch},
		{kerr.ProducerFenced, 10, kerr.InvalidProducerEpoch},
		{kerr.TransactionAbortable, 12, kerr.TransactionAbortable},
		{kerr.TransactionAbortable, 11, kerr.TransactionAbortable},
		{kerr.TransactionAbortable, 10, kerr.InvalidTxnState},
		{kerr.ClusterAuthorizationFailed, 11, kerr.InvalidTxnState},
		{kerr.InvalidTxnState, 11, kerr.InvalidTxnState},
		{kerr.InvalidProducerIDMapping, 12, kerr.InvalidProducerIDMapping},
	} {
		if got := txnProduceCode(tc.code.Code, tc.version); got != tc.want.Code {
			t.Errorf("%s to Produce v%d: %s, want %s", tc.code.Message, tc.version, kerr.ErrorForCode(got), tc.want.Message)
		}
	}
}

// concurrentEndTxns answers EndTxn CONCURRENT_TRANSACTIONS until done is
// closed, which Completed returns.
type concurrentEndTxns struct {
	Transactions
	done  chan struct{}
	calls atomic.Int32
}

func (c *concurrentEndTxns) EndTxn(context.Context, string, int64, int16, bool, bool) (int64, int16, int16) {
	c.calls.Add(1)
	select {
	case <-c.done:
		return 5, 1, 0
	default:
		return -1, -1, kerr.ConcurrentTransactions.Code
	}
}

func (c *concurrentEndTxns) Completed(string) <-chan struct{} { return c.done }

// TestEndTxnWaitsForCompletion: an EndTxn the coordinator answers
// CONCURRENT_TRANSACTIONS (the previous transaction's markers still being
// written) is held until the coordinator's signal and tried again, not
// answered at once (clients back off 20 ms or more).
func TestEndTxnWaitsForCompletion(t *testing.T) {
	txns := &concurrentEndTxns{done: make(chan struct{})}
	h := newErrorsHandlersWith(t, Config{Transactions: txns})
	time.AfterFunc(20*time.Millisecond, func() { close(txns.done) }) // the markers land meanwhile
	req := kmsg.NewPtrEndTxnRequest()
	req.SetVersion(5)
	req.TransactionalID, req.ProducerID, req.Commit = "tx", 5, true
	resp := serve(t, h, req).(*kmsg.EndTxnResponse)
	if resp.ErrorCode != 0 || resp.ProducerEpoch != 1 || txns.calls.Load() != 2 {
		t.Fatalf("answered %d (epoch %d) after %d calls, want 0 (epoch 1) after 2", resp.ErrorCode, resp.ProducerEpoch, txns.calls.Load())
	}
}
