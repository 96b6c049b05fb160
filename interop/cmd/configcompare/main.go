// Command configcompare sends the same config requests (DescribeConfigs,
// AlterConfigs, IncrementalAlterConfigs, ListConfigResources, CreateTopics,
// CreatePartitions) to a
// Kafka broker and a Strata broker and prints, case by case, what each answers,
// marking the cases where they differ. It is how the expected values of Strata's
// config tables (internal/handlers, internal/metadata) were taken from Kafka 4.4.
//
// Both brokers are single nodes with node id 1 (every request goes to it),
// PLAINTEXT, no authorizer; see
// interop/README.md ("Config answers against Kafka").
//
//	go run ./interop/cmd/configcompare -kafka 127.0.0.1:9192 -strata 127.0.0.1:9292
//
// The exit status is 1 when any case differs.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

func main() {
	kafkaAddr := flag.String("kafka", "", "the Kafka broker's address")
	strataAddr := flag.String("strata", "", "the Strata broker's address")
	verbose := flag.Bool("v", false, "print every case, not only those that differ")
	only := flag.String("run", "", "run only the cases whose name contains this")
	flag.Parse()
	if *kafkaAddr == "" || *strataAddr == "" {
		fmt.Fprintln(os.Stderr, "configcompare: -kafka and -strata are required")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := fmt.Sprintf("%06d", rand.IntN(1e6))
	var results [2][]result
	for i, addr := range []string{*kafkaAddr, *strataAddr} {
		s, err := newSystem(ctx, addr, run)
		if err != nil {
			fmt.Fprintf(os.Stderr, "configcompare: %s: %v\n", addr, err)
			os.Exit(2)
		}
		results[i] = s.runAll(ctx, *only)
		s.cl.Close()
		s.cl0.Close()
	}
	differ := 0
	for i := range results[0] {
		k, s := results[0][i], results[1][i]
		same := k.out == s.out
		if !same {
			differ++
		}
		if !same || *verbose {
			mark := "same"
			if !same {
				mark = "DIFFERS"
			}
			fmt.Printf("== %s [%s]\n   kafka:  %s\n   strata: %s\n", k.name, mark, k.out, s.out)
			if k.msgs != "" || s.msgs != "" {
				fmt.Printf("   kafka messages:  %s\n   strata messages: %s\n", k.msgs, s.msgs)
			}
		}
	}
	fmt.Printf("%d cases, %d differ\n", len(results[0]), differ)
	if differ > 0 {
		os.Exit(1)
	}
}

type result struct{ name, out, msgs string }

type system struct {
	cl    *kgo.Client
	cl0   *kgo.Client // sends ListConfigResources at v0
	run   string
	topic string // one partition, segment.bytes overridden; "o-" another of one partition
}

func newSystem(ctx context.Context, addr, run string) (*system, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		return nil, err
	}
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.ListConfigResources), 0)
	cl0, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MaxVersions(v))
	if err != nil {
		return nil, err
	}
	s := &system{cl: cl, cl0: cl0, run: run, topic: "cc-t-" + run}
	adm := kadm.NewClient(cl)
	seg := "2097152"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": &seg}, s.topic); err != nil {
		return nil, err
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, s.name("o-")); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		md, err := adm.Metadata(ctx, s.topic)
		if err == nil && md.Topics[s.topic].Err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("topic not ready: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return s, nil
}

// name maps the script's placeholders to this system's names: T is the
// run's topic, anything ending in '-' gets the run appended.
func (s *system) name(n string) string {
	switch {
	case n == "T":
		return s.topic
	case len(n) > 0 && n[len(n)-1] == '-':
		return n + s.run
	}
	return n
}

func (s *system) runAll(ctx context.Context, only string) []result {
	var out []result
	for _, c := range cases {
		if only != "" && !contains(c.name, only) {
			out = append(out, result{name: c.name, out: "skipped"})
			continue
		}
		req := c.req(s)
		cl := s.cl
		if c.v0 {
			cl = s.cl0
		}
		resp, err := cl.Broker(1).Request(ctx, req) // both are node 1
		r := result{name: c.name}
		if err != nil {
			r.out = "error: " + err.Error()
		} else {
			r.out, r.msgs = summarize(resp, c.namesOnly, s.run)
		}
		out = append(out, r)
		if c.settle {
			time.Sleep(time.Second) // a change reaches the broker's metadata
		}
	}
	return out
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
