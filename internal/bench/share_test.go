package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func records(partition int32, offsets ...int64) []*kgo.Record {
	rs := make([]*kgo.Record, len(offsets))
	for i, o := range offsets {
		rs[i] = &kgo.Record{Partition: partition, Offset: o, Value: []byte("abcd")}
	}
	return rs
}

// TestShareTrackerWindow: an explicit window opens when told (every member is
// assigned) and counts only what is read after; records outside the range
// listed at the start and second deliveries do not count.
func TestShareTrackerWindow(t *testing.T) {
	start := map[int32]int64{0: 10, 1: 0}
	end := map[int32]int64{0: 14, 1: 2}
	tr := newShareTracker([]int32{0, 1}, start, end, 2, true)
	tr.add(0, records(0, 9, 10, 11, 14)) // 9 and 14 lie outside [10, 14)
	tr.add(0, records(0, 10))            // a second delivery
	tr.add(1, records(1, 0))
	if w := tr.window(); !w.started.IsZero() {
		t.Fatalf("an explicit window opened by itself: %+v", w)
	}
	tr.open()
	w := tr.window()
	if w.started.IsZero() || w.base != 3 || w.end != 0 {
		t.Fatalf("window %+v, want started with base 3", w)
	}
	select {
	case <-tr.done:
		t.Fatal("done before every record was read")
	default:
	}
	tr.add(1, records(0, 12, 13))
	tr.add(0, records(1, 1))
	<-tr.done
	if w := tr.window(); w.end == 0 || tr.read() != 6 || tr.redelivered.Load() != 1 || tr.meanSize() != 4 {
		t.Fatalf("window %+v, read %d, redelivered %d", w, tr.read(), tr.redelivered.Load())
	}
	if err := tr.incomplete(6, false, time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestShareTrackerFirstRecord: otherwise the first member's first records open
// the window; a run that stops early says how far it got.
func TestShareTrackerFirstRecord(t *testing.T) {
	tr := newShareTracker([]int32{0}, map[int32]int64{0: 0}, map[int32]int64{0: 3}, 4, false)
	tr.add(2, records(0, 0))
	if w := tr.window(); w.started.IsZero() || w.base != 1 {
		t.Fatalf("window %+v, want started with base 1", w)
	}
	err := tr.incomplete(3, false, time.Minute)
	if err == nil || !strings.Contains(err.Error(), "read 1 of 3") {
		t.Fatalf("got %v", err)
	}
	tr.add(1, records(0, 1, 2))
	if err := tr.incomplete(3, true, time.Minute); err == nil || !strings.Contains(err.Error(), "dead-letter") {
		t.Fatalf("got %v, want the dead-letter topic incomplete", err)
	}
}

func TestValidateShare(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Config)
		bad    string
	}{
		{name: "accept", change: func(*Config) {}},
		{name: "classic", change: func(c *Config) { c.ShareAck = ShareClassic }},
		{name: "dead letters", change: func(c *Config) { c.ShareAck, c.DeadLetterTopic = ShareReject, "dlq.t" }},
		{name: "no group", change: func(c *Config) { c.Group = "" }, bad: "group"},
		{name: "bad ack", change: func(c *Config) { c.ShareAck = "maybe" }, bad: "not accept"},
		{name: "dead letters accepted", change: func(c *Config) { c.DeadLetterTopic = "dlq.t" }, bad: "reject runs only"},
		{name: "dead letters to itself", change: func(c *Config) { c.ShareAck, c.DeadLetterTopic = ShareReject, "t" }, bad: "must not be"},
		{name: "no members", change: func(c *Config) { c.Consumers = 0 }, bad: "consumers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			c.Group, c.ShareAck, c.Count = "g", ShareAccept, 0
			tc.change(&c)
			err := c.Validate("share")
			switch {
			case tc.bad == "" && err != nil:
				t.Fatal(err)
			case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
				t.Fatalf("got %v, want an error about %q", err, tc.bad)
			}
		})
	}
}

// TestShare reads a prefilled topic with a share group (both ways of
// acknowledging) and with a classic group, against franz-go's kfake.
func TestShare(t *testing.T) {
	brokers := fakeCluster(t)
	ctx := testCtx(t)
	for _, ack := range []string{ShareAccept, ShareAckEach, ShareClassic} {
		t.Run(ack, func(t *testing.T) {
			c := runConfig(brokers, "share")
			c.Partitions, c.Consumers, c.Count, c.Duration = 1, 1, 2000, 45*time.Second
			c.Group, c.ShareAck = "g-"+ack, ack
			res, err := Share(ctx, c)
			if err != nil {
				t.Fatalf("%v (%+v)", err, res)
			}
			if res.Records <= 0 || res.Records > 2000 || res.RecordsPerSec <= 0 || res.RecordSize != 100 {
				t.Fatalf("%+v", res)
			}
			checkOrdered(t, res.Latency)
			var out bytes.Buffer
			if err := res.WriteTable(&out); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), "g-"+ack+", members "+ack) {
				t.Fatalf("table lacks the group:\n%s", out.String())
			}
		})
	}
}

func TestAllAssigned(t *testing.T) {
	member := func(partitions ...int32) kmsg.ShareGroupDescribeResponseGroupMember {
		m := kmsg.NewShareGroupDescribeResponseGroupMember()
		if len(partitions) > 0 {
			tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
			tp.Partitions = partitions
			m.Assignment.TopicPartitions = append(m.Assignment.TopicPartitions, tp)
		}
		return m
	}
	describe := func(group string, code int16, ms ...kmsg.ShareGroupDescribeResponseGroupMember) *kmsg.ShareGroupDescribeResponse {
		resp := kmsg.NewPtrShareGroupDescribeResponse()
		g := kmsg.NewShareGroupDescribeResponseGroup()
		g.GroupID, g.ErrorCode, g.Members = group, code, ms
		resp.Groups = append(resp.Groups, g)
		return resp
	}
	for _, tc := range []struct {
		name string
		resp *kmsg.ShareGroupDescribeResponse
		want bool
	}{
		{"all assigned", describe("g", 0, member(0), member(0, 1)), true},
		{"one unassigned", describe("g", 0, member(0), member()), false},
		{"too few members", describe("g", 0, member(0)), false},
		{"another group", describe("h", 0, member(0), member(0)), false},
		{"an error", describe("g", 69, member(0), member(0)), false},
	} {
		if got := allAssigned(tc.resp, "g", 2); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
