package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.50, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := percentile(ds, tc.q); got != tc.want {
			t.Errorf("percentile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile of nothing = %v", got)
	}
	if ds[0] != 100*time.Millisecond {
		t.Error("percentile sorted its argument")
	}
}

func TestFetchSessionSummary(t *testing.T) {
	got := fetchSessionSummary(1000, map[string][2]float64{"strata": {31000, 120}, "kafka": {31000, 29000}})
	want := "Fetch requests of an idle consumer of 1000 partitions: Strata first 31k B, median of the rest 120 B: " +
		"incremental (later requests under a tenth of the first); Kafka first 31k B, median of the rest 29k B: **not incremental**."
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	got = fetchSessionSummary(10, map[string][2]float64{})
	want = "Fetch requests of an idle consumer of 10 partitions: Strata no fetches recorded; Kafka no fetches recorded."
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestEveryReplica(t *testing.T) {
	for _, tc := range []struct {
		name   string
		counts replicaCounts
		want   bool
	}{
		{"every broker holds every partition", replicaCounts{1: 10, 2: 10, 3: 10}, true},
		{"a follower still creating logs", replicaCounts{1: 10, 2: 4, 3: 10}, false},
		{"a broker did not answer", replicaCounts{1: 10, 2: 10}, false},
		{"nothing created", replicaCounts{1: 0, 2: 0, 3: 0}, false},
		{"no answer", nil, false},
	} {
		if got := tc.counts.everyReplica(3, 10); got != tc.want {
			t.Errorf("%s: everyReplica(%v) = %v, want %v", tc.name, tc.counts, got, tc.want)
		}
	}
}

// TestWaitReplicasUntilEveryLogExists: a broker that shows a leader for every
// partition may still be creating their logs (session 16); waitReplicas
// returns only once a DescribeLogDirs answer lists every partition of the
// topic, counting no other topic's and going on past an answer with an error.
func TestWaitReplicasUntilEveryLogExists(t *testing.T) {
	const topic, partitions = "scale-8", 8
	answers := []struct {
		created int32 // partitions of topic listed
		failed  bool  // the log dir answers an error
	}{{0, false}, {3, false}, {5, true}, {7, false}, {partitions, false}}
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var mu sync.Mutex
	asked := 0
	c.ControlKey(int16(kmsg.DescribeLogDirs), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		a := answers[min(asked, len(answers)-1)]
		asked++
		resp := r.ResponseKind().(*kmsg.DescribeLogDirsResponse)
		dir := kmsg.NewDescribeLogDirsResponseDir()
		dir.Dir = "/data/logs"
		if a.failed {
			dir.ErrorCode = kerr.KafkaStorageError.Code
		}
		for _, name := range []string{"other", topic} {
			rt := kmsg.NewDescribeLogDirsResponseDirTopic()
			rt.Topic = name
			for i := range a.created {
				rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
				rp.Partition = i
				rt.Partitions = append(rt.Partitions, rp)
			}
			dir.Topics = append(dir.Topics, rt)
		}
		resp.Dirs = append(resp.Dirs, dir)
		return resp, nil, true
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := waitReplicas(ctx, replicaCounter(kadm.NewClient(cl), topic), 1, partitions); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := asked
	answers, asked = answers[:2], 0 // from now on, never complete
	mu.Unlock()
	if got != 5 {
		t.Errorf("returned after %d DescribeLogDirs answers, want 5 (the first listing every partition)", got)
	}

	// The bound (here the caller's) ends a wait that never completes, with
	// the last counts.
	short, cancelShort := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancelShort()
	err = waitReplicas(short, replicaCounter(kadm.NewClient(cl), topic), 1, partitions)
	if err == nil || !strings.Contains(err.Error(), "map[0:3]") {
		t.Errorf("waiting for logs that never come: got %v, want an error with the last counts map[0:3]", err)
	}
}
