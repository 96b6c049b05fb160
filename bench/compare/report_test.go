package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/bench"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestVerdict(t *testing.T) {
	for _, tc := range []struct {
		ratio, target float64
		lower         bool
		want          string
	}{
		{2, 1.5, false, "met"},
		{1.5, 1.5, false, "met"},
		{1.2, 1.5, false, "**not met**"},
		{0.4, 0.5, true, "met"},
		{0.7, 0.5, true, "**not met**"},
		{0.7, 0, true, ""},
		{0, 1.5, false, ""},
	} {
		if got := verdict(tc.ratio, tc.target, tc.lower); got != tc.want {
			t.Errorf("verdict(%v, %v, %v) = %q, want %q", tc.ratio, tc.target, tc.lower, got, tc.want)
		}
	}
}

func TestFigure(t *testing.T) {
	for in, want := range map[float64]string{0.123: "0.123", 12.34: "12.3", 512: "512", 45_678: "46k", 1_234_567: "1.23M"} {
		if got := figure(in); got != want {
			t.Errorf("figure(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestKafkaProperties(t *testing.T) {
	one := []kafkaNode{{id: 1, kafkaPort: 9001, controllerPort: 9002, dir: "/d"}}
	three := []kafkaNode{{id: 1, kafkaPort: 1, controllerPort: 2, dir: "/a"}, {id: 2, kafkaPort: 3, controllerPort: 4, dir: "/b"},
		{id: 3, kafkaPort: 5, controllerPort: 6, dir: "/c"}}
	ssl := []kafkaNode{{id: 1, kafkaPort: 9001, controllerPort: 9002, dir: "/d", sslPort: 9003, keystore: "/k.pem"}}
	for _, tc := range []struct {
		name      string
		node      kafkaNode
		all       []kafkaNode
		flushEach bool
		want      []string
		not       []string
	}{
		{name: "one node", node: one[0], all: one, want: []string{
			"process.roles=broker,controller\n",
			"node.id=1\n",
			"controller.quorum.voters=1@127.0.0.1:9002\n",
			"listeners=PLAINTEXT://127.0.0.1:9001,CONTROLLER://127.0.0.1:9002\n",
			"log.dirs=/d/data\n",
			"offsets.topic.replication.factor=1\n",
		}, not: []string{"flush", "SSL"}},
		{name: "equal durability", node: one[0], all: one, flushEach: true, want: []string{"log.flush.interval.messages=1\n"}},
		{name: "node 2 of 3", node: three[1], all: three, want: []string{
			"node.id=2\n",
			"controller.quorum.voters=1@127.0.0.1:2,2@127.0.0.1:4,3@127.0.0.1:6\n",
			"advertised.listeners=PLAINTEXT://127.0.0.1:3\n",
			"log.dirs=/b/data\n",
			"offsets.topic.replication.factor=3\n",
			"transaction.state.log.min.isr=2\n",
		}, not: []string{"SSL"}},
		{name: "SSL listener", node: ssl[0], all: ssl, want: []string{
			"listeners=PLAINTEXT://127.0.0.1:9001,SSL://127.0.0.1:9003,CONTROLLER://127.0.0.1:9002\n",
			"advertised.listeners=PLAINTEXT://127.0.0.1:9001,SSL://127.0.0.1:9003\n",
			"inter.broker.listener.name=PLAINTEXT\n",
			"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL\n",
			"ssl.keystore.type=PEM\n",
			"ssl.keystore.location=/k.pem\n",
		}},
	} {
		p := kafkaProperties(tc.node, tc.all, tc.flushEach)
		for _, want := range tc.want {
			if !strings.Contains(p, want) {
				t.Errorf("%s: properties lack %q:\n%s", tc.name, want, p)
			}
		}
		for _, not := range tc.not {
			if strings.Contains(p, not) {
				t.Errorf("%s: properties hold %q:\n%s", tc.name, not, p)
			}
		}
	}
	if id := kafkaClusterID(); len(id) != 22 || id == kafkaClusterID() {
		t.Errorf("cluster id %q: want 22 random characters", id)
	}
	// A leading '-' is taken for an option by kafka-storage format; one id
	// in 64 would start with it (4,096 draws: all but certain to meet one).
	for range 4096 {
		if id := kafkaClusterID(); strings.HasPrefix(id, "-") {
			t.Fatalf("cluster id %q starts with '-'", id)
		}
	}
}

func TestMemoryOfThisProcess(t *testing.T) {
	rss, peak, err := processMemory(os.Getpid())
	if err != nil || rss <= 0 || peak < rss {
		t.Fatalf("rss %d KiB, peak %d KiB, %v", rss, peak, err)
	}
	s := &system{pids: func() []int { return []int{os.Getpid(), os.Getpid()} }}
	sum, _, err := s.memory()
	if err != nil || sum < 2*rss*9/10 {
		t.Fatalf("two processes: %d KiB, %v; want about %d", sum, err, 2*rss)
	}
	if _, _, err := (&system{pids: func() []int { return nil }}).memory(); err == nil {
		t.Fatal("memory of no process")
	}
}

func TestChildPIDs(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep command:", err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	if got := childPIDs(os.Getpid()); !slices.Contains(got, cmd.Process.Pid) {
		t.Fatalf("children %v lack %d", got, cmd.Process.Pid)
	}
}

func TestPairingTable(t *testing.T) {
	wls := []workload{
		{name: "produce", mode: "produce", target: 1.5},
		{name: "e2e", mode: "e2e", lowerIsBetter: true, target: 0.5},
	}
	p := &pairing{Name: "defaults", Kafka: "defaults", Workloads: wls,
		StartupMS: map[string]float64{"strata": 100, "kafka": 1000},
		RSSKiB:    map[string]int64{"strata": 10 << 10, "kafka": 100 << 10}, PeakRSSKiB: map[string]int64{}}
	for i, v := range []float64{300, 100, 200, 100, 250, 100} { // strata, kafka, ...
		sys := []string{"strata", "kafka"}[i%2]
		// Each run moved 2 GB; Strata used 1 s of CPU, Kafka 4 s.
		cpu := []float64{1, 4}[i%2]
		p.add(sample{Workload: "produce", System: sys, Round: i/2 + 1, Value: v, BrokerCPUSeconds: cpu, Result: bench.Result{Bytes: 2e9}})
	}
	p.add(sample{Workload: "e2e", System: "strata", Round: 1, Value: 30, Result: bench.Result{}})
	p.add(sample{Workload: "e2e", System: "kafka", Round: 1, Value: 40})
	p.add(sample{Workload: "e2e", System: "kafka", Round: 2, Err: "broker gone"})
	var out bytes.Buffer
	p.writeTable(&out)
	for _, want := range []string{
		"| produce | records/s | 250 | 100 | **2.50** | >= 1.5: met | 300 / 200 / 250 | 100 / 100 / 100 |",
		"| e2e | p99 ms | 30 | 40 | **0.75** | <= 0.5: **not met** |",
		"| broker RSS after the runs | MiB | 10 | 100 | **0.10** | <= 0.2: met |",
		"| startup to first ApiVersions + Metadata | ms | 100 | 1000 | 0.10 |",
		"| produce | 0.5 | 2 | **0.25** | <= 0.3: met | 0.5 / 0.5 / 0.5 | 2 / 2 / 2 |",
		"- e2e, kafka, round 2: broker gone",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestPerfTestCPU(t *testing.T) {
	p := &pairing{PerfTest: map[string]perfTestRun{
		"strata": {Args: "ProducerPerformance a", Output: "100 records sent", WallSeconds: 40, ClientCPUSeconds: 36, BrokerCPUSeconds: 10},
		"kafka":  {Args: "ProducerPerformance b", Output: "90 records sent", Err: "exit status 1"},
	}}
	var out bytes.Buffer
	p.writePerfTests(&out)
	got := out.String()
	if want := "client CPU 36.0 s (0.90 cores), broker CPU 10.0 s (0.25 cores)"; !strings.Contains(got, want) {
		t.Errorf("perf test lacks %q:\n%s", want, got)
	}
	// A run without its CPU read (it failed before the JVM ran) says nothing of it.
	if n := strings.Count(got, "client CPU"); n != 1 {
		t.Errorf("%d CPU lines, want 1:\n%s", n, got)
	}
}

func TestPrime(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for range 2 { // the second time the topic exists already
		if err := prime(ctx, c.ListenAddrs(), "primed", 1); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "primed")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := ends.Lookup("primed", 0); !ok || o.Offset != 2 {
		t.Fatalf("end offset %+v, want 2 primer records", o)
	}
}
