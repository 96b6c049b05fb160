package server

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/wait"
)

// TestRackAwarePlacement: four brokers on two racks (--rack); Metadata shows the
// racks, and every partition of a new topic with two replicas has one on each.
func TestRackAwarePlacement(t *testing.T) {
	racks := []string{"east", "east", "west", "west"}
	c := startCluster(t, 4, func(i int, cfg *config.Config) { cfg.Rack = racks[i] })
	_, adm := c.client()
	ctx := context.Background()
	var md kadm.Metadata
	wait.For(t, "four brokers with racks in Metadata", func() bool {
		var err error
		md, err = adm.Metadata(ctx)
		if err != nil || len(md.Brokers) != 4 {
			return false
		}
		for _, b := range md.Brokers {
			if b.Rack == nil || *b.Rack != racks[b.NodeID-1] {
				return false
			}
		}
		return true
	})
	if _, err := adm.CreateTopic(ctx, 8, 2, nil, "racked"); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the topic's partitions in Metadata", func() bool {
		var err error
		md, err = adm.Metadata(ctx, "racked")
		return err == nil && len(md.Topics["racked"].Partitions) == 8
	})
	leaders := map[int32]int{}
	for _, p := range md.Topics["racked"].Partitions {
		if len(p.Replicas) != 2 || racks[p.Replicas[0]-1] == racks[p.Replicas[1]-1] {
			t.Errorf("partition %d: replicas %v are not on both racks", p.Partition, p.Replicas)
		}
		leaders[p.Replicas[0]]++
	}
	for id := int32(1); id <= 4; id++ {
		if leaders[id] != 2 {
			t.Errorf("broker %d is the preferred leader of %d partitions, want 2: %v", id, leaders[id], leaders)
		}
	}
}
