package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/bench"
)

// TestPrepareConsumeReadsEveryTopicBeforeTheRounds: before the first timed
// round of a consume workload, both systems' topics are filled and then each
// is read once. The first read in this process pays for growing its heap (for
// lz4, about 31,500 page faults against almost none from the third read on),
// and on Strata for reading from the disk what the page cache dropped behind
// the log's tail; when only the fills came first, Strata's first round, always
// the first timed read, paid both. A system whose fill fails is reported by
// name, and the others are still read.
func TestPrepareConsumeReadsEveryTopicBeforeTheRounds(t *testing.T) {
	var (
		mu     sync.Mutex
		events []string // "<system> produce" and "<system> fetch", in order
	)
	cluster := func(name string, refuseTopics bool) *kfake.Cluster {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		for key, what := range map[kmsg.Key]string{kmsg.Produce: "produce", kmsg.Fetch: "fetch"} {
			c.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				mu.Lock()
				events = append(events, name+" "+what)
				mu.Unlock()
				return nil, nil, false
			})
		}
		if refuseTopics {
			c.ControlKey(int16(kmsg.CreateTopics), func(r kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				req := r.(*kmsg.CreateTopicsRequest)
				resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
				for _, rt := range req.Topics {
					st := kmsg.NewCreateTopicsResponseTopic()
					st.Topic, st.ErrorCode = rt.Topic, kerr.PolicyViolation.Code
					resp.Topics = append(resp.Topics, st)
				}
				return resp, nil, true
			})
		}
		return c
	}
	strata, kafka, refusing := cluster("strata", false), cluster("kafka", false), cluster("refusing", true)

	o := options{nodes: 1, consumeRecords: 3000, duration: time.Second}
	wl := workload{name: "consume 1 KiB lz4", slug: "c1k-lz4", mode: "consume", size: 1024, acks: bench.AcksAll, compression: "lz4"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	unfilled := prepareConsume(ctx, o, []consumeTarget{
		{name: "strata", wl: wl, seeds: strata.ListenAddrs()},
		{name: "refusing", wl: wl, seeds: refusing.ListenAddrs()},
		{name: "kafka", wl: wl, seeds: kafka.ListenAddrs()},
	})
	if len(unfilled) != 1 || unfilled["refusing"] == nil {
		t.Fatalf("unfilled = %v, want the refusing system's fill only", unfilled)
	}

	mu.Lock()
	defer mu.Unlock()
	lastProduce := -1
	firstFetch := map[string]int{}
	for i, e := range events {
		var sys, what string
		fmt.Sscan(e, &sys, &what)
		if what == "produce" {
			lastProduce = i
		} else if _, ok := firstFetch[sys]; !ok {
			firstFetch[sys] = i
		}
	}
	for _, sys := range []string{"strata", "kafka"} {
		i, ok := firstFetch[sys]
		switch {
		case !ok:
			t.Errorf("%s's topic was never read before the rounds", sys)
		case i < lastProduce:
			t.Errorf("%s's topic was read (event %d) before every fill was done (event %d)", sys, i, lastProduce)
		}
	}
	if firstFetch["strata"] > firstFetch["kafka"] {
		t.Errorf("read kafka's topic first; the targets' order is strata, kafka")
	}
	if slices.Contains(events, "refusing fetch") {
		t.Errorf("the refusing system's unfilled topic was read")
	}
}
