package main

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/bench"
)

// TestPrimeWaitsForEveryBroker: brokers that have not applied a new topic yet
// answer Metadata for it with UNKNOWN_TOPIC_OR_PARTITION (Kafka's brokers
// apply a topic of 1,000 partitions one after another, seconds apart when
// loaded). Priming waits for them instead of failing its records after the
// client's few unknown-topic retries, as session 9's three-node Kafka run did.
func TestPrimeWaitsForEveryBroker(t *testing.T) {
	const topic, unknownAnswers = "primed", 30
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var brokers []kmsg.MetadataResponseBroker
	for i, addr := range c.ListenAddrs() {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := strconv.Atoi(port)
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = int32(i), host, int32(p)
		brokers = append(brokers, b)
	}
	var mu sync.Mutex
	unknown := 0
	c.ControlKey(int16(kmsg.Metadata), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.MetadataRequest)
		if len(req.Topics) != 1 || req.Topics[0].Topic == nil || *req.Topics[0].Topic != topic {
			return nil, nil, false
		}
		mu.Lock()
		defer mu.Unlock()
		if unknown >= unknownAnswers {
			return nil, nil, false
		}
		unknown++
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		resp.Brokers, resp.ControllerID = brokers, 0
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic, rt.ErrorCode = kmsg.StringPtr(topic), kerr.UnknownTopicOrPartition.Code
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := primePartitions(ctx, c.ListenAddrs(), topic, 20, 3); err != nil {
		t.Fatalf("priming: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if unknown < unknownAnswers {
		t.Fatalf("only %d of %d unknown-topic answers were given: the test did not delay the topic", unknown, unknownAnswers)
	}
}

// TestPrimeTopicConfigs: a run's topic is created with its TopicConfigs, and
// priming fails when the broker does not report them (here a topic of the name
// made before without them).
func TestPrimeTopicConfigs(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	zstd := map[string]string{"compression.type": "zstd"}
	cfg := bench.Config{Brokers: c.ListenAddrs(), Topic: "compressed", Partitions: 1, ReplicationFactor: 1, TopicConfigs: zstd}
	if err := primeTopic(ctx, cfg); err != nil {
		t.Fatalf("priming: %v", err)
	}
	if err := prime(ctx, c.ListenAddrs(), "plain", 1); err != nil {
		t.Fatal(err)
	}
	cfg.Topic = "plain"
	if err := primeTopic(ctx, cfg); err == nil || !strings.Contains(err.Error(), "compression.type") {
		t.Fatalf("a topic without compression.type=zstd primed: %v", err)
	}
}
