package controller

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-stream/strata/internal/metadata"
)

func testRand(seed byte) *rand.ChaCha8 { return rand.NewChaCha8([32]byte{seed}) }

func apply(t *testing.T, img *metadata.Image, recs ...metadata.Record) *metadata.Image {
	t.Helper()
	out, err := metadata.ApplyAll(img, recs)
	if err != nil {
		t.Fatalf("ApplyAll: %v", err)
	}
	return out
}

// clusterImage has live brokers 1..n (epoch 1).
func clusterImage(t *testing.T, n int) *metadata.Image {
	img := metadata.NewImage()
	for id := int32(1); id <= int32(n); id++ {
		img = apply(t, img, &metadata.RegisterBrokerRecord{BrokerID: id, Epoch: 1, Host: "127.0.0.1", Port: 9000 + id})
	}
	return img
}

// withTopic adds a topic with the given replica lists; the ISR is all replicas
// and the leader the first.
func withTopic(t *testing.T, img *metadata.Image, name string, id metadata.UUID, configs map[string]string, replicas ...[]int32) *metadata.Image {
	recs := []metadata.Record{&metadata.TopicRecord{Name: name, ID: id, Configs: configs}}
	for i, r := range replicas {
		recs = append(recs, &metadata.PartitionRecord{TopicID: id, Partition: int32(i), Replicas: r, ISR: r, Leader: r[0]})
	}
	return apply(t, img, recs...)
}

func fence(t *testing.T, img *metadata.Image, ids ...int32) *metadata.Image {
	for _, id := range ids {
		img = apply(t, img, &metadata.FenceBrokerRecord{BrokerID: id, Epoch: img.Broker(id).Epoch})
	}
	return img
}

// markShutdown marks brokers ids in controlled shutdown in img, as a
// controller did before this one took over (its memory, ShuttingDown, has
// none of them).
func markShutdown(t *testing.T, img *metadata.Image, ids ...int32) *metadata.Image {
	for _, id := range ids {
		img = apply(t, img, &metadata.ControlledShutdownRecord{BrokerID: id, Epoch: img.Broker(id).Epoch})
	}
	return img
}

// partState is the expected leader, leader epoch and ISR of one partition.
type partState struct {
	topic       string
	index       int32
	leader      int32
	leaderEpoch int32
	isr         []int32
}

func checkPartitions(t *testing.T, img *metadata.Image, want []partState) {
	t.Helper()
	for _, w := range want {
		p := img.Partition(w.topic, w.index)
		if p == nil {
			t.Errorf("%s-%d missing", w.topic, w.index)
			continue
		}
		if p.Leader != w.leader || p.LeaderEpoch != w.leaderEpoch || !slices.Equal(p.ISR, w.isr) {
			t.Errorf("%s-%d = leader %d epoch %d isr %v, want %d %d %v",
				w.topic, w.index, p.Leader, p.LeaderEpoch, p.ISR, w.leader, w.leaderEpoch, w.isr)
		}
	}
}

// inOrder is a manual assignment whose entries are partitions 0, 1, ... in turn.
func inOrder(replicas ...[]int32) []PartitionReplicas {
	entries := make([]PartitionReplicas, len(replicas))
	for i, r := range replicas {
		entries[i] = PartitionReplicas{Partition: int32(i), Replicas: r}
	}
	return entries
}
