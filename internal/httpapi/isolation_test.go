package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/txntest"
)

// TestPollIsolation: /poll reads committed data by default (it stops at an open
// transaction and never returns an aborted one's records); "isolation":
// "read_uncommitted" sees everything below the high-water mark.
func TestPollIsolation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := sharedNode(t)
	n.createTopic("isolation", 1)
	cl, _ := n.kafka(kgo.ClientID(txntest.ClientID))
	pid, err := txntest.ProducerID(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := txntest.ProducerID(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(txntest.Produce(ctx, cl, "isolation", 0, plain, 0, false, "1"))   // 0
	must(txntest.Produce(ctx, cl, "isolation", 0, pid, 0, true, "2", "3")) // 1-2
	must(txntest.Produce(ctx, cl, "isolation", 0, plain, 1, false, "4"))   // 3

	values := func(recs []polledRecord) []string {
		var out []string
		for _, r := range recs {
			out = append(out, fmt.Sprint(r.Value))
		}
		return out
	}
	committed := map[string]any{"group": "iso-committed", "topic": "isolation", "timeout_ms": 300}
	uncommitted := map[string]any{"group": "iso-uncommitted", "topic": "isolation", "isolation": "read_uncommitted"}
	if got := values(n.pollN(uncommitted, 4)); !slices.Equal(got, []string{"1", "2", "3", "4"}) {
		t.Fatalf("read_uncommitted: %v", got)
	}
	if got := values(n.pollN(committed, 1)); !slices.Equal(got, []string{"1"}) {
		t.Fatalf("read_committed with a transaction open: %v", got)
	}
	if recs := n.poll(committed); len(recs) != 0 {
		t.Fatalf("read_committed read past the open transaction: %v", values(recs))
	}

	must(txntest.EndTxn(ctx, cl, "isolation", 0, pid, false))            // 4: abort
	must(txntest.Produce(ctx, cl, "isolation", 0, plain, 2, false, "5")) // 5
	if got := values(n.pollN(committed, 2)); !slices.Equal(got, []string{"4", "5"}) {
		t.Fatalf("read_committed after the abort: %v", got)
	}

	n.must(http.StatusBadRequest, "POST", "/poll", map[string]any{"group": "iso-bad", "topic": "isolation", "isolation": "dirty"})
}
