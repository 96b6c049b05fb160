package history

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// The anomaly classes CheckShare reports (a share group's run).
const (
	// ShareLost: an acknowledged send that the share group neither accepted
	// nor wrote to its dead-letter topic.
	ShareLost = "share-lost"
	// ShareAcceptedTwice: a record with two answered ACCEPTs, or answered
	// ACCEPT and REJECT, or an answered ACCEPT and a dead letter.
	ShareAcceptedTwice = "share-accepted-twice"
	// ShareDeliveredAfterAck: a record delivered by a poll that began after an
	// ACCEPT or REJECT of it had been answered.
	ShareDeliveredAfterAck = "share-delivered-after-ack"
	// ShareCountBack: a record's delivery count did not go up from one delivery
	// to a later one (each acquisition is saved with its count before it is
	// handed out), or went above the delivery count limit.
	ShareCountBack = "share-count-back"
	// ShareBadDeadLetter: a dead letter whose headers name no acknowledged send,
	// another topic or group, a value that is not the record's, or a delivery
	// count that is not the one the record was rejected at (or the limit).
	ShareBadDeadLetter = "share-bad-dead-letter"
)

// ShareClasses lists every class CheckShare reports.
var ShareClasses = []string{ShareLost, ShareAcceptedTwice, ShareDeliveredAfterAck, ShareCountBack, ShareBadDeadLetter}

// ShareDelivery is one record a share poll handed to a consumer, with the poll's
// start and end.
type ShareDelivery struct {
	Consumer   string
	Partition  int32
	Offset     int64
	Value      string
	Count      int16 // delivery_count
	Start, End time.Time
}

// ShareAck is one acknowledgement a consumer sent and its answer: OK (answered
// acknowledged), Failed (refused: the member did not hold the record) or Unknown
// (no answer, or an error that does not say whether it was applied).
type ShareAck struct {
	Consumer   string
	Partition  int32
	Offset     int64
	Type       string // accept, release or reject
	Count      int16  // delivery count of the delivery it acknowledges
	Outcome    Outcome
	Start, End time.Time
}

// DeadLetter is one record of the group's dead-letter topic, as its headers
// describe its origin.
type DeadLetter struct {
	Topic, Group  string // __dlq.errors.topic and __dlq.errors.group
	Partition     int32
	Offset        int64
	DeliveryCount int16
	Value         string // the copied value
}

// ShareHistory is a share-group run's record: the produced records, what the
// group's consumers were handed and answered, and the dead-letter topic.
type ShareHistory struct {
	Topic, Group string
	Limit        int16 // share.delivery.count.limit
	Sends        []Send
	Deliveries   []ShareDelivery
	Acks         []ShareAck
	DeadLetters  []DeadLetter
}

// ShareCounts are a share run's totals.
type ShareCounts struct {
	Records, Deliveries, Redelivered         int // acknowledged sends; deliveries; records delivered more than once
	Accepted, AcceptedUnanswered, DeadLetter int // records resolved each way
	DeadLetterAtLimit                        int // of DeadLetter, records with a dead letter at the delivery count limit
	DeadLetterCopies                         int // dead letters beyond one per record (allowed)
	AcksUnknown, AcksFailed                  int
}

// CheckShare judges a share run. Under at-least-once a record may be delivered
// again after an ACCEPT that was never answered (the connection died, the
// leader moved): that is not a repeat. What must hold is:
//
//  1. every acknowledged send ends ACCEPTed or dead-lettered: an answered
//     ACCEPT, a dead letter, or, after an unanswered ACCEPT with nobody handed
//     it again (at a higher count), accepted without an answer;
//  2. at most one answered ACCEPT per record, never together with an answered
//     REJECT or a dead letter;
//  3. no poll that began after an answered ACCEPT or REJECT ended hands the
//     record out again;
//  4. of two deliveries of a record, the later one (it began after the other
//     ended) has a delivery count at least as high (equal is allowed: a new
//     leader restores the counts last saved, acquisitions are not), none above
//     the limit;
//  5. every dead letter names a record sent, this topic and group, the record's
//     value, and the delivery count it was rejected at (or the limit).
func CheckShare(h ShareHistory) (Result, ShareCounts) {
	var res Result
	res.Counts = map[string]int{}
	for _, c := range ShareClasses {
		res.Counts[c] = 0
	}
	sent := map[pos]string{}
	for _, s := range h.Sends {
		if s.Outcome == OK {
			sent[pos{s.Partition, s.Offset}] = s.Value
			res.Acked++
		}
	}
	deliveries, acks := h.byRecord()
	dead, atLimit := map[pos]int{}, map[pos]bool{}
	var counts ShareCounts
	counts.Records, counts.Deliveries = res.Acked, len(h.Deliveries)
	for _, dl := range h.DeadLetters {
		at := pos{dl.Partition, dl.Offset}
		v, ok := sent[at]
		switch {
		case !ok:
			res.Add(ShareBadDeadLetter, "%s-%d@%d: a dead letter of no acknowledged send", dl.Topic, dl.Partition, dl.Offset)
			continue
		case dl.Topic != h.Topic || dl.Group != h.Group:
			res.Add(ShareBadDeadLetter, "%d@%d: headers name topic %q group %q", dl.Partition, dl.Offset, dl.Topic, dl.Group)
		case dl.Value != v:
			res.Add(ShareBadDeadLetter, "%d@%d: value %q, sent %q", dl.Partition, dl.Offset, dl.Value, v)
		case !deadLetterCountOK(dl.DeliveryCount, acks[at], h.Limit):
			res.Add(ShareBadDeadLetter, "%d@%d: delivery count %d, neither a rejected delivery's nor the limit %d", dl.Partition, dl.Offset, dl.DeliveryCount, h.Limit)
		}
		atLimit[at] = atLimit[at] || dl.DeliveryCount == h.Limit
		if dead[at]++; dead[at] > 1 {
			counts.DeadLetterCopies++
		}
	}
	for _, at := range slices.SortedFunc(func(yield func(pos) bool) {
		for k := range sent {
			if !yield(k) {
				return
			}
		}
	}, func(a, b pos) int { return cmp.Or(cmp.Compare(a.p, b.p), cmp.Compare(a.o, b.o)) }) {
		ds, as := deliveries[at], acks[at]
		slices.SortFunc(ds, func(a, b ShareDelivery) int { return a.Start.Compare(b.Start) })
		slices.SortFunc(as, func(a, b ShareAck) int { return a.End.Compare(b.End) })
		if len(ds) > 1 {
			counts.Redelivered++
		}
		for i, d := range ds {
			if d.Value != sent[at] {
				res.Add(InconsistentOffsets, "%d@%d: delivered value %q, sent %q", at.p, at.o, d.Value, sent[at])
			}
			if h.Limit > 0 && d.Count > h.Limit {
				res.Add(ShareCountBack, "%d@%d: delivered to %s at count %d, above the limit %d", at.p, at.o, d.Consumer, d.Count, h.Limit)
			}
			for _, e := range ds[:i] {
				if e.End.Before(d.Start) && d.Count <= e.Count {
					res.Add(ShareCountBack, "%d@%d: delivered at count %d to %s, later at %d to %s", at.p, at.o, e.Count, e.Consumer, d.Count, d.Consumer)
					break
				}
			}
		}
		accepted, rejected := 0, 0
		for _, a := range as {
			if a.Outcome == Unknown {
				counts.AcksUnknown++
			}
			if a.Outcome == Failed {
				counts.AcksFailed++
			}
			if a.Outcome != OK || a.Type == "release" {
				continue
			}
			if a.Type == "accept" {
				accepted++
			} else {
				rejected++
			}
			for _, d := range ds {
				if d.Start.After(a.End) {
					res.Add(ShareDeliveredAfterAck, "%d@%d: %s's %s answered at %s, handed to %s again at count %d by a poll begun %s",
						at.p, at.o, a.Consumer, a.Type, a.End.Format(timeFormat), d.Consumer, d.Count, d.Start.Format(timeFormat))
					break
				}
			}
		}
		switch {
		case accepted > 1:
			res.Add(ShareAcceptedTwice, "%d@%d: %d answered ACCEPTs", at.p, at.o, accepted)
		case accepted == 1 && (rejected > 0 || dead[at] > 0):
			res.Add(ShareAcceptedTwice, "%d@%d: an answered ACCEPT, %d answered REJECTs, %d dead letters", at.p, at.o, rejected, dead[at])
		}
		switch {
		case accepted > 0:
			counts.Accepted++
		case dead[at] > 0:
			counts.DeadLetter++
			if atLimit[at] {
				counts.DeadLetterAtLimit++
			}
		case acceptedUnanswered(as, ds):
			counts.AcceptedUnanswered++
		default:
			res.Add(ShareLost, "%d@%d (%q): %d deliveries, acknowledgements %v, not accepted, not dead-lettered", at.p, at.o, sent[at], len(ds), ackList(as))
		}
	}
	return res, counts
}

// Unsettled counts the acknowledged sends of h that CheckShare would not yet
// find resolved: not ACCEPTed with an answer, not dead-lettered, and not
// accepted without an answer by an ACCEPT that ended at least wait before now
// (had it not been applied, the record would have been handed out again by
// then). A run's share drain waits for it to reach 0.
func (h ShareHistory) Unsettled(now time.Time, wait time.Duration) int {
	deliveries, acks := h.byRecord()
	dead := map[pos]bool{}
	for _, dl := range h.DeadLetters {
		dead[pos{dl.Partition, dl.Offset}] = true
	}
	n := 0
	for _, s := range h.Sends {
		at := pos{s.Partition, s.Offset}
		if s.Outcome != OK || dead[at] {
			continue
		}
		var old []ShareAck
		accepted := false
		for _, a := range acks[at] {
			accepted = accepted || a.Type == "accept" && a.Outcome == OK
			if now.Sub(a.End) >= wait {
				old = append(old, a)
			}
		}
		if !accepted && !acceptedUnanswered(old, deliveries[at]) {
			n++
		}
	}
	return n
}

// byRecord groups h's deliveries and acknowledgements by record.
func (h ShareHistory) byRecord() (map[pos][]ShareDelivery, map[pos][]ShareAck) {
	ds := map[pos][]ShareDelivery{}
	for _, d := range h.Deliveries {
		ds[pos{d.Partition, d.Offset}] = append(ds[pos{d.Partition, d.Offset}], d)
	}
	as := map[pos][]ShareAck{}
	for _, a := range h.Acks {
		as[pos{a.Partition, a.Offset}] = append(as[pos{a.Partition, a.Offset}], a)
	}
	return ds, as
}

// timeFormat prints the times in an anomaly's detail.
const timeFormat = "15:04:05.000"

// deadLetterCountOK: a dead letter's count is the count of a delivery rejected
// (answered or not), or the limit.
func deadLetterCountOK(count int16, acks []ShareAck, limit int16) bool {
	if count == limit {
		return true
	}
	for _, a := range acks {
		if a.Type == "reject" && a.Outcome != Failed && a.Count == count {
			return true
		}
	}
	return false
}

// acceptedUnanswered: an ACCEPT of the record without an answer, and no delivery
// of it at a higher count than the one that ACCEPT acknowledged. Every
// acquisition is saved with a higher count than the last before it is handed
// out, so had the ACCEPT not been applied the record's next delivery would have
// had one. (A poll's end says nothing: one answered late may carry an earlier
// delivery, at a lower count, after the ACCEPT was sent.)
func acceptedUnanswered(as []ShareAck, ds []ShareDelivery) bool {
	for _, a := range as {
		if a.Type == "accept" && a.Outcome == Unknown && !deliveredPast(ds, a.Count) {
			return true
		}
	}
	return false
}

// deliveredPast reports whether one of ds has a delivery count above count.
func deliveredPast(ds []ShareDelivery, count int16) bool {
	return slices.ContainsFunc(ds, func(d ShareDelivery) bool { return d.Count > count })
}

func ackList(as []ShareAck) []string {
	var out []string
	for _, a := range as {
		out = append(out, fmt.Sprintf("%s %s %s", a.Consumer, a.Type, a.Outcome))
	}
	return out
}
