package server

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/throttle"
	"github.com/strata-stream/strata/internal/wait"
)

// syncProducer writes numbered records one at a time (ProduceSync, a pause
// between them) until stopped, counting acknowledged and failed writes.
type syncProducer struct {
	mu    sync.Mutex
	acked int
	fails []error
	stop  chan struct{}
	done  chan struct{}
}

func startSyncProducer(cl *kgo.Client, pause time.Duration) *syncProducer {
	p := &syncProducer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for i := 0; ; i++ {
			select {
			case <-p.stop:
				return
			case <-time.After(pause):
			}
			err := cl.ProduceSync(context.Background(), &kgo.Record{Value: fmt.Append(nil, i)}).FirstErr()
			p.mu.Lock()
			if err != nil {
				p.fails = append(p.fails, err)
			} else {
				p.acked++
			}
			p.mu.Unlock()
		}
	}()
	return p
}

// Acked is the number of writes acknowledged so far.
func (p *syncProducer) Acked() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acked
}

// Stop ends the writes and returns what was acknowledged and what failed.
func (p *syncProducer) Stop() (acked int, fails []error) {
	close(p.stop)
	<-p.done
	return p.acked, p.fails
}

// TestThrottledMove moves a partition holding 8 MiB from [1 2] to [4 2] under
// a 1 MiB/s replication throttle on one side, leader or follower, each in its
// own cluster: the rate on every broker of the move and, as
// kafka-reassign-partitions --throttle sets them, the existing replicas as
// leader-throttled and the new one as follower-throttled. The move completes no
// faster than the throttle allows (the bucket lets one second's worth and one
// fetch's worth through at once), and the in-sync follower, also listed, is
// never held back: it stays in the ISR (replica.lag.time.max 2s here) and
// acks=all writes go on during the move. The figure is logged; the upper
// bound on the time is only the test's deadline.
func TestThrottledMove(t *testing.T) {
	for _, side := range []string{"leader", "follower"} {
		t.Run(side, func(t *testing.T) { throttledMove(t, side) })
	}
}

func throttledMove(t *testing.T, side string) {
	c := startCluster(t, 3)
	if _, err := c.addNode(4, brokerOnly); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cl, adm := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("slow"),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(1<<20))
	minISR := "2"
	if _, err := adm.CreateTopic(ctx, 1, 2, map[string]*string{"min.insync.replicas": &minISR}, "slow"); err != nil {
		t.Fatal(err)
	}
	if err := assign(t, adm, "slow", []int32{1, 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"slow": {0: {}}}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "broker 1 to lead slow-0", func() bool { return c.leaderOf(adm, "slow", 0) == 0 })

	const (
		size = 8 << 20
		rate = 1 << 20
	)
	value := bytes.Repeat([]byte("x"), 16<<10)
	var recs []*kgo.Record
	for range size / len(value) {
		recs = append(recs, &kgo.Record{Value: value})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// A controller election under load answers NOT_CONTROLLER: retry until the
	// configs are in.
	alter := func(what string, do func() (kadm.AlterConfigsResponses, error)) {
		t.Helper()
		var last error
		wait.For(t, what, func() bool {
			rs, err := do()
			if err == nil {
				err = rs[0].Err
			}
			last = err
			return err == nil
		})
		if last != nil {
			t.Fatalf("%s: %v", what, last)
		}
	}
	r := fmt.Sprint(rate)
	for _, b := range []int32{1, 2, 4} {
		alter(fmt.Sprintf("broker %d's throttle", b), func() (kadm.AlterConfigsResponses, error) {
			return adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: side + ".replication.throttled.rate", Value: &r}}, b)
		})
	}
	wantLeader, wantFollower := int64(rate), throttle.Unlimited
	if side == "follower" {
		wantLeader, wantFollower = wantFollower, wantLeader
	}
	leaders, followers := "0:1,0:2", "0:4"
	alter("the topic's throttled replicas", func() (kadm.AlterConfigsResponses, error) {
		return adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
			{Op: kadm.SetConfig, Name: "leader.replication.throttled.replicas", Value: &leaders},
			{Op: kadm.SetConfig, Name: "follower.replication.throttled.replicas", Value: &followers},
		}, "slow")
	})
	// Every broker of the move applies the throttle before it starts.
	wait.For(t, "the throttle on brokers 1, 2 and 4", func() bool {
		for _, i := range []int{0, 1, 3} {
			p, err := c.nodes[i].replicas.Partition("slow", 0)
			if i == 3 {
				p, err = nil, nil
			}
			if err != nil || (p != nil && p.Config().LeaderThrottledReplicas == nil) {
				return false
			}
			if l, f := c.nodes[i].replicas.ThrottleRates(); l != wantLeader || f != wantFollower {
				return false
			}
		}
		return true
	})

	// acks=all writes go on while the move runs; the in-sync follower 2 must
	// never leave the ISR.
	prod := startSyncProducer(cl, 20*time.Millisecond)
	var (
		mu     sync.Mutex
		shrunk []int32
		wg     sync.WaitGroup
	)
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			p, err := c.nodes[0].replicas.Partition("slow", 0)
			if err != nil || !p.IsLeader() {
				return // leadership moves when the move completes
			}
			if isr := p.ISR(); !slices.Contains(isr, 2) {
				mu.Lock()
				shrunk = isr
				mu.Unlock()
			}
		}
	}()

	start := time.Now()
	if err := assign(t, adm, "slow", []int32{4, 2}); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, 2*time.Minute, "the throttled move to complete", func() bool { return reassignment(t, adm, "slow") == nil })
	took := time.Since(start)
	close(stop)
	wg.Wait()
	acked, fails := prod.Stop()

	moved := float64(size) / took.Seconds()
	t.Logf("moved %d MiB in %v: %.2f MiB/s under a %.2f MiB/s %s throttle", size>>20, took.Round(time.Millisecond), moved/(1<<20), float64(rate)/(1<<20), side)
	// At most one second's worth plus one fetch (4 MiB) pass before the rate holds.
	if minTook := time.Duration(float64(size-rate-4<<20) / rate * float64(time.Second)); took < minTook {
		t.Errorf("the move took %v, less than the throttle allows (%v)", took, minTook)
	}
	if shrunk != nil {
		t.Errorf("the in-sync follower 2 left the ISR during the throttled move: ISR %v", shrunk)
	}
	if len(fails) > 0 {
		t.Errorf("%d acks=all writes failed during the move, the first: %v", len(fails), fails[0])
	}
	if acked == 0 {
		t.Error("no acks=all write succeeded during the move")
	}
	c.checkAgreement(t, "slow", 0)
}
