package bench

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMonoClock: the one-read clock gives the wall time time.Now gives, and a
// monotonic reading that durations can be taken from.
func TestMonoClock(t *testing.T) {
	c := monoClock{start: time.Now()}
	before := time.Now()
	now := c.now()
	after := time.Now()
	if now.Before(before) || now.After(after) {
		t.Fatalf("now %v outside %v .. %v (monotonic)", now, before, after)
	}
	// The wall clock alone (Round(0) drops the monotonic reading): the same,
	// within what the wall clock may have been slewed by meanwhile.
	const slack = time.Millisecond
	wall := now.Round(0)
	if wall.Before(before.Round(0).Add(-slack)) || wall.After(after.Round(0).Add(slack)) {
		t.Fatalf("wall %v outside %v .. %v", wall, before.Round(0), after.Round(0))
	}
	if d := time.Since(now); d < 0 || d > time.Minute {
		t.Fatalf("time since now: %v", d)
	}
}

// TestSentRecordRecycled: an acknowledged record is counted, timed and handed
// out again clean, and a failed one counted with the first error kept.
func TestSentRecordRecycled(t *testing.T) {
	spec := sendSpec{latency: newRecorder()}
	a := &acknowledgements{c: &Config{}, spec: &spec}
	due := time.Now()
	for i := range 100 {
		r := a.record(due)
		if r.rec.Value != nil || !r.rec.Timestamp.IsZero() || r.rec.Offset != 0 || !r.due.Equal(due) {
			t.Fatalf("record %d handed out dirty: %+v, due %v", i, r.rec, r.due)
		}
		r.rec.Value, r.rec.Timestamp, r.rec.Offset = []byte("v"), due, int64(i)
		r.done(&r.rec, nil)
	}
	errFirst, errLater := errors.New("first"), errors.New("later")
	for _, err := range []error{errFirst, errLater} {
		r := a.record(due)
		r.done(&r.rec, err)
	}
	if got := a.delivered.Load(); got != 100 {
		t.Fatalf("delivered %d, want 100", got)
	}
	if got := a.failed.Load(); got != 2 || a.firstErr != errFirst {
		t.Fatalf("failed %d (first error %v), want 2 (%v)", got, a.firstErr, errFirst)
	}
	if got := spec.latency.summary("").Count; got != 100 {
		t.Fatalf("latency of %d records, want 100", got)
	}
}

// BenchmarkClock: a read of the time with time.Now and with monoClock (one
// clock read fewer).
func BenchmarkClock(b *testing.B) {
	var sink time.Time
	b.Run("time.Now", func(b *testing.B) {
		for b.Loop() {
			sink = time.Now()
		}
	})
	b.Run("monoClock", func(b *testing.B) {
		c := monoClock{start: time.Now()}
		for b.Loop() {
			sink = c.now()
		}
	})
	_ = sink
}

// inflight counts a client's Produce requests written and not yet answered,
// and the most at once.
type inflight struct {
	mu       sync.Mutex
	now, max int
}

func (f *inflight) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key != kmsg.Produce.Int16() || err != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now++
	f.max = max(f.max, f.now)
}

func (f *inflight) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key != kmsg.Produce.Int16() || err != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now--
}

// TestProduceAcksLeaderPipelines: with acks=1 a producer keeps several Produce
// requests in flight, as with acks=all and as Kafka's producer does, instead
// of franz-go's one without idempotence. The broker answers each Produce 5 ms
// late, so the requests overlap whenever the client lets them.
func TestProduceAcksLeaderPipelines(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	c.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		// Late answers: the cluster's loop waits here while the client's
		// next requests queue up in flight. (kfake's SleepControl races
		// inside kfake under the race detector.)
		time.Sleep(5 * time.Millisecond)
		return nil, nil, false // answered by the cluster
	})
	for _, acks := range []string{AcksLeader, AcksAll} {
		t.Run("acks="+acks, func(t *testing.T) {
			cfg := runConfig(c.ListenAddrs(), "inflight-"+acks)
			cfg.Count, cfg.Producers, cfg.Partitions, cfg.Acks = 2000, 1, 1, acks
			cfg.BatchMaxBytes = 2048 // many batches, each ready at once
			f := &inflight{}
			cfg.ClientOpts = []kgo.Opt{kgo.WithHooks(f)}
			if res, err := Produce(testCtx(t), cfg); err != nil || res.Records != 2000 {
				t.Fatalf("run: %+v, %v", res, err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.max < 2 || f.max > unackedInflight {
				t.Fatalf("at most %d Produce requests in flight, want 2..%d", f.max, unackedInflight)
			}
		})
	}
}
