package main

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/testcluster"
)

// readBack reads topic from the start until want records came back, failing
// the test on a fetch error or after 30s; after names what moved the data.
func readBack(t *testing.T, c *testcluster.Cluster, topic string, want int, after string) {
	t.Helper()
	read := c.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := 0
	for got < want {
		fs := read.PollFetches(ctx)
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("read %d of %d records after %s: %v", got, want, after, errs)
		}
		got += fs.NumRecords()
	}
}
