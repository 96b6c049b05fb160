package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/testcluster"
)

// TestClusterStopsCleanly: every node of a cluster whose nodes each lead a
// partition exits with status 0 after SIGTERM, whether the nodes are stopped
// together or one after the other.
func TestClusterStopsCleanly(t *testing.T) {
	for _, tc := range []struct {
		name     string
		together bool
	}{
		{"together", true},
		{"one-by-one", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testcluster.Start(t, 3)
			c.CreateTopic("stop", [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}, minISR2)
			cl := c.Client(kgo.DefaultProduceTopic("stop"))
			for i := range 30 {
				if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			if tc.together {
				c.Stop(c.Nodes()...) // fails the test unless every node exits 0
			} else {
				for _, n := range c.Nodes() {
					n.Stop()
				}
			}
			t.Logf("stopped in %v", time.Since(start).Round(time.Millisecond))
		})
	}
}
