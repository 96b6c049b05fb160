package history

import (
	"testing"
	"time"
)

// TestCheckShareFlagsEachAnomaly plants each share anomaly in a clean history
// and requires CheckShare to flag it, and only it.
func TestCheckShareFlagsEachAnomaly(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	clean := func() ShareHistory {
		return ShareHistory{
			Topic: "t", Group: "g", Limit: 3,
			Sends: []Send{
				{Value: "a", Outcome: OK, Partition: 0, Offset: 0},
				{Value: "b", Outcome: OK, Partition: 0, Offset: 1},
				{Value: "c", Outcome: OK, Partition: 0, Offset: 2},
				{Value: "d", Outcome: OK, Partition: 0, Offset: 3},
			},
			Deliveries: []ShareDelivery{
				{Consumer: "x", Partition: 0, Offset: 0, Value: "a", Count: 1, Start: at(0), End: at(1)},
				// b: accept without an answer, then never handed out again.
				{Consumer: "x", Partition: 0, Offset: 1, Value: "b", Count: 1, Start: at(0), End: at(1)},
				// c: rejected, dead-lettered at count 2 (delivered to y after x's lock expired).
				{Consumer: "x", Partition: 0, Offset: 2, Value: "c", Count: 1, Start: at(0), End: at(1)},
				{Consumer: "y", Partition: 0, Offset: 2, Value: "c", Count: 2, Start: at(5), End: at(6)},
				// d: released up to the limit.
				{Consumer: "x", Partition: 0, Offset: 3, Value: "d", Count: 1, Start: at(0), End: at(1)},
				{Consumer: "y", Partition: 0, Offset: 3, Value: "d", Count: 2, Start: at(3), End: at(4)},
				{Consumer: "x", Partition: 0, Offset: 3, Value: "d", Count: 3, Start: at(6), End: at(7)},
			},
			Acks: []ShareAck{
				{Consumer: "x", Partition: 0, Offset: 0, Type: "accept", Count: 1, Outcome: OK, Start: at(1), End: at(2)},
				{Consumer: "x", Partition: 0, Offset: 1, Type: "accept", Count: 1, Outcome: Unknown, Start: at(1), End: at(2)},
				{Consumer: "y", Partition: 0, Offset: 2, Type: "reject", Count: 2, Outcome: OK, Start: at(6), End: at(7)},
				{Consumer: "x", Partition: 0, Offset: 3, Type: "release", Count: 1, Outcome: OK, Start: at(1), End: at(2)},
				{Consumer: "y", Partition: 0, Offset: 3, Type: "release", Count: 2, Outcome: OK, Start: at(4), End: at(5)},
				{Consumer: "x", Partition: 0, Offset: 3, Type: "release", Count: 3, Outcome: OK, Start: at(7), End: at(8)},
			},
			DeadLetters: []DeadLetter{
				{Topic: "t", Group: "g", Partition: 0, Offset: 2, DeliveryCount: 2, Value: "c"},
				{Topic: "t", Group: "g", Partition: 0, Offset: 3, DeliveryCount: 3, Value: "d"},
				{Topic: "t", Group: "g", Partition: 0, Offset: 3, DeliveryCount: 3, Value: "d"}, // written twice: allowed
			},
		}
	}
	if res, counts := CheckShare(clean()); !res.OK() {
		t.Fatalf("clean history flagged:\n%s", res.Summary())
	} else if want := (ShareCounts{Records: 4, Deliveries: 7, Redelivered: 2, Accepted: 1, AcceptedUnanswered: 1, DeadLetter: 2, DeadLetterAtLimit: 1, DeadLetterCopies: 1, AcksUnknown: 1}); counts != want {
		t.Fatalf("counts %+v, want %+v", counts, want)
	}
	for _, tc := range []struct {
		class string
		plant func(*ShareHistory)
	}{
		{ShareLost, func(h *ShareHistory) { h.DeadLetters = h.DeadLetters[:1] }},
		{ShareLost, func(h *ShareHistory) { h.Acks[1].Type = "release" }},
		{ShareLost, func(h *ShareHistory) { // b handed out again after its unanswered accept, then nothing
			h.Deliveries = append(h.Deliveries, ShareDelivery{Consumer: "y", Partition: 0, Offset: 1, Value: "b", Count: 2, Start: at(3), End: at(4)})
		}},
		{ShareAcceptedTwice, func(h *ShareHistory) {
			h.Acks = append(h.Acks, ShareAck{Consumer: "y", Partition: 0, Offset: 0, Type: "accept", Count: 1, Outcome: OK, Start: at(1), End: at(2)})
		}},
		{ShareAcceptedTwice, func(h *ShareHistory) {
			h.DeadLetters = append(h.DeadLetters, DeadLetter{Topic: "t", Group: "g", Partition: 0, Offset: 0, DeliveryCount: 3, Value: "a"})
		}},
		{ShareDeliveredAfterAck, func(h *ShareHistory) {
			h.Deliveries = append(h.Deliveries, ShareDelivery{Consumer: "y", Partition: 0, Offset: 0, Value: "a", Count: 2, Start: at(3), End: at(4)})
		}},
		{ShareCountBack, func(h *ShareHistory) { h.Deliveries[6].Count = 1 }},
		{ShareCountBack, func(h *ShareHistory) { h.Deliveries[6].Count = 2 }}, // as the delivery before it
		{ShareCountBack, func(h *ShareHistory) { h.Deliveries[6].Count = 4 }},
		{ShareBadDeadLetter, func(h *ShareHistory) { h.DeadLetters[0].DeliveryCount = 1 }},
		{ShareBadDeadLetter, func(h *ShareHistory) { h.DeadLetters[0].Group = "other" }},
		{ShareBadDeadLetter, func(h *ShareHistory) { h.DeadLetters[0].Value = "x" }},
		{ShareBadDeadLetter, func(h *ShareHistory) {
			h.DeadLetters = append(h.DeadLetters, DeadLetter{Topic: "t", Group: "g", Partition: 0, Offset: 9, DeliveryCount: 3, Value: "x"})
		}},
		{InconsistentOffsets, func(h *ShareHistory) { h.Deliveries[0].Value = "z" }},
	} {
		h := clean()
		tc.plant(&h)
		res, _ := CheckShare(h)
		if res.Counts[tc.class] == 0 {
			t.Errorf("planted %s not flagged:\n%s", tc.class, res.Summary())
		}
		for c, n := range res.Counts {
			if c != tc.class && n > 0 && !(tc.class == ShareAcceptedTwice && c == ShareLost) {
				t.Errorf("planted %s, also flagged %s:\n%s", tc.class, c, res.Summary())
			}
		}
	}
}
