package metadata

import (
	"fmt"
	"testing"
)

// benchImage has n topics of 4 partitions each on brokers 1-3.
func benchImage(b *testing.B, n int) (*Image, []UUID) {
	recs := []Record{register(1, 1), register(2, 1), register(3, 1)}
	ids := make([]UUID, n)
	for i := range ids {
		ids[i] = UUID{byte(i), byte(i >> 8), byte(i >> 16), 1}
		recs = append(recs, &TopicRecord{Name: fmt.Sprint("topic-", i), ID: ids[i]})
		for p := int32(0); p < 4; p++ {
			recs = append(recs, &PartitionRecord{TopicID: ids[i], Partition: p, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1})
		}
	}
	img, err := ApplyAll(NewImage(), recs)
	if err != nil {
		b.Fatal(err)
	}
	return img, ids
}

// BenchmarkApplyPartitionChange measures one ISR change (one batch) on an image
// of 10,000 topics: the copy-on-write cost of the top-level maps.
func BenchmarkApplyPartitionChange(b *testing.B) {
	img, ids := benchImage(b, 10000)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		p := img.TopicByID(ids[i%len(ids)]).Partitions[0]
		isr := []int32{1, 2, 3}
		if len(p.ISR) == 3 {
			isr = isr[:2]
		}
		next, err := Apply(img, &PartitionChangeRecord{TopicID: p.TopicID, BasePartitionEpoch: p.PartitionEpoch, Leader: 1, LeaderEpoch: p.LeaderEpoch, ISR: isr})
		if err != nil {
			b.Fatal(err)
		}
		img = next
	}
}

// BenchmarkSnapshot encodes and decodes an image of 10,000 topics.
func BenchmarkSnapshot(b *testing.B) {
	img, _ := benchImage(b, 10000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeSnapshot(EncodeSnapshot(img)); err != nil {
			b.Fatal(err)
		}
	}
}
