package interop

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/testcluster"
	"github.com/strata-stream/strata/interop/kafkatools"
	"github.com/strata-stream/strata/interop/report"
)

// TestShareGroups runs KIP-932 share groups with the Java KafkaShareConsumer on a
// 3-node Strata cluster:
//
//  1. Create a topic of 3 partitions (replication factor 3) and set the group config
//     share.auto.offset.reset=earliest (IncrementalAlterConfigs on a GROUP resource).
//  2. Two Java share consumers join one share group (ShareGroupDescribe shows both
//     with an assignment), then franz-go writes 200 keyed records.
//  3. The members read them with explicit acknowledgement: they reject the records
//     keyed key-07, release on its first delivery every record whose number ends in
//     3, and accept the rest.
//  4. Check the deliveries: each member received records; every record was accepted
//     exactly once (by either member), except the key-07 records, rejected once and
//     never accepted; every released record came back with delivery count 2 and was
//     accepted then; no acknowledgement was refused.
//  5. Kafka 4.4's tools: kafka-configs sets and shows a group config,
//     kafka-console-share-consumer reads every record in a new group,
//     kafka-share-groups --describe --offsets shows every partition's start offset
//     at its end (the state of share partitions led by each of the three nodes),
//     --reset-offsets --to-earliest takes them back to 0 and every record is read
//     again, and kafka-share-groups lists and describes the groups.
//  6. The coordinator of each group is killed and restarted: the groups are in
//     __consumer_offsets, so kafka-share-groups lists and describes them as before
//     with no member joining again.
func TestShareGroups(t *testing.T) {
	const topic, group, rejectKey = "interop-share", "interop-share", "key-07"
	java, c, _, _ := startShareCluster(t, topic, group, 0)

	j := job{
		bootstrap: strings.Join(c.Bootstrap(), ","),
		topic:     topic,
		mode:      "share",
		args:      []string{"--group", group, "--reject-key", rejectKey, "--idle-ms", "6000"},
		timeout:   2 * time.Minute,
	}
	runs := []*clientRun{startClient(t, java, j), startClient(t, java, j)}
	waitShareMembers(t, c.Bootstrap(), group, len(runs))
	produced := produceKeyed(t, c.Bootstrap(), topic, "go", records)
	var deliveries []report.Delivery
	for i, r := range runs {
		s := r.wait(t)
		t.Logf("share member %d (%s): %d deliveries", i+1, s.Library, len(s.Deliveries))
		if len(s.Deliveries) == 0 {
			t.Errorf("share member %d (%s) received no records", i+1, s.Library)
		}
		deliveries = append(deliveries, s.Deliveries...)
	}
	checkShareDeliveries(t, produced, deliveries, rejectKey)

	t.Run("kafka-tools", func(t *testing.T) {
		kafkatools.Require(t)
		bs := []string{"--bootstrap-server", strings.Join(c.Bootstrap(), ",")}
		run := func(tool string, args ...string) string {
			return kafkatools.MustRun(t, tool, append(args, bs...)...)
		}
		const console = "interop-share-console"
		run("kafka-configs", "--alter", "--entity-type", "groups", "--entity-name", console,
			"--add-config", "share.auto.offset.reset=earliest,share.record.lock.duration.ms=15000")
		out := run("kafka-configs", "--describe", "--entity-type", "groups", "--entity-name", console)
		if !strings.Contains(out, "share.auto.offset.reset=earliest") || !strings.Contains(out, "share.record.lock.duration.ms=15000") {
			t.Errorf("kafka-configs --describe shows:\n%s", out)
		}
		var want []string
		ends := map[int32]int64{}
		for _, p := range produced {
			want = append(want, string(p.Value))
			ends[p.Partition] = max(ends[p.Partition], p.Offset+1)
		}
		slices.Sort(want)
		readAll := func() {
			t.Helper()
			out := run("kafka-console-share-consumer", "--topic", topic, "--group", console,
				"--max-messages", strconv.Itoa(records), "--timeout-ms", "60000")
			got := strings.Fields(out)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("kafka-console-share-consumer read %d values, want the %d written", len(got), len(want))
			}
		}
		// offsets checks what --describe --offsets shows for every partition: the
		// group's coordinator reads the state of share partitions led by every node.
		offsets := func(what string, start func(p int32) int64) {
			t.Helper()
			out := run("kafka-share-groups", "--describe", "--offsets", "--group", console)
			for p, end := range ends {
				row := fmt.Sprintf(`(?m)^%s\s+%s\s+%d\s+%d\s+%d\s*$`, console, topic, p, start(p), end-start(p))
				if !regexp.MustCompile(row).MatchString(out) {
					t.Errorf("%s: --describe --offsets lacks partition %d at start offset %d, lag %d:\n%s", what, p, start(p), end-start(p), out)
				}
			}
		}
		readAll()
		offsets("after reading everything", func(p int32) int64 { return ends[p] })
		run("kafka-share-groups", "--reset-offsets", "--group", console, "--all-topics", "--to-earliest", "--execute")
		offsets("after --reset-offsets --to-earliest", func(int32) int64 { return 0 })
		readAll()
		out = run("kafka-share-groups", "--list")
		if !strings.Contains(out, group) || !strings.Contains(out, console) {
			t.Errorf("kafka-share-groups --list shows:\n%s", out)
		}
		out = run("kafka-share-groups", "--describe", "--group", console, "--state")
		if !strings.Contains(out, console) || !strings.Contains(out, "Empty") {
			t.Errorf("kafka-share-groups --describe --state shows:\n%s", out)
		}

		for _, g := range []string{group, console} {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			n, err := c.GroupCoordinator(ctx, g)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("restarting node %d, the coordinator of %s", n.ID, g)
			n.Kill()
			n.Restart()
			waitShareMembers(t, c.Bootstrap(), g, -1) // the new coordinator has loaded it
		}
		out = run("kafka-share-groups", "--list")
		for _, g := range []string{group, console} {
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(g) + `\s*$`).MatchString(out) {
				t.Errorf("after the restarts kafka-share-groups --list lacks %s:\n%s", g, out)
			}
		}
		out = run("kafka-share-groups", "--describe", "--group", console, "--state")
		if !strings.Contains(out, console) || !strings.Contains(out, "Empty") {
			t.Errorf("after the restarts kafka-share-groups --describe --state shows:\n%s", out)
		}
	})
}

// startShareCluster starts 3 nodes, creates topic (3 partitions, replication factor
// 3), makes group start at the earliest offset and writes n keyed records.
func startShareCluster(t *testing.T, topic, group string, n int) (client, *testcluster.Cluster, *kadm.Client, []report.Produced) {
	t.Helper()
	if os.Getenv(envTarget) == "kfake" {
		t.Skip("runs on a Strata cluster; not with STRATA_INTEROP_TARGET=kfake")
	}
	java := clientNamed(t, "java")
	requireClient(t, java)
	t.Setenv(testcluster.BinaryEnv, strataBinary(t))
	c := testcluster.Start(t, 3)
	adm := newAdmin(t, c.Bootstrap()...)
	createReplicatedTopic(t, c, adm, topic)
	setGroupConfig(t, c.Bootstrap(), group, "share.auto.offset.reset", "earliest")
	return java, c, adm, produceKeyed(t, c.Bootstrap(), topic, "go", n)
}

// checkShareDeliveries checks step 4 of TestShareGroups.
func checkShareDeliveries(t *testing.T, produced []report.Produced, deliveries []report.Delivery, rejectKey string) {
	t.Helper()
	type pos struct {
		p int32
		o int64
	}
	byPos := map[pos][]report.Delivery{}
	for _, d := range deliveries {
		if strings.HasPrefix(d.Ack, "failed:") {
			t.Errorf("acknowledgement of %d/%d refused: %s", d.Partition, d.Offset, d.Ack)
		}
		byPos[pos{d.Partition, d.Offset}] = append(byPos[pos{d.Partition, d.Offset}], d)
	}
	released := 0
	for _, p := range produced {
		ds := byPos[pos{p.Partition, p.Offset}]
		count := func(ack string) int {
			n := 0
			for _, d := range ds {
				if d.Ack == ack {
					n++
				}
			}
			return n
		}
		for _, d := range ds {
			if string(d.Value) != string(p.Value) {
				t.Errorf("%d/%d delivered %q, written %q", p.Partition, p.Offset, d.Value, p.Value)
			}
		}
		n, _ := strconv.Atoi(string(p.Value[strings.LastIndexByte(string(p.Value), '-')+1:]))
		switch {
		case string(p.Key) == rejectKey:
			if count("reject") != 1 || count("accept") != 0 {
				t.Errorf("%d/%d (key %s): deliveries %+v, want one rejection", p.Partition, p.Offset, p.Key, ds)
			}
		case n%10 == 3:
			acceptedAt2 := slices.ContainsFunc(ds, func(d report.Delivery) bool { return d.Ack == "accept" && d.DeliveryCount == 2 })
			if count("release") != 1 || count("accept") != 1 || !acceptedAt2 {
				t.Errorf("%d/%d (%s): deliveries %+v, want a release then an acceptance at delivery 2", p.Partition, p.Offset, p.Value, ds)
			}
			released++
		default:
			if count("accept") != 1 || len(ds) != 1 {
				t.Errorf("%d/%d (%s): deliveries %+v, want one acceptance", p.Partition, p.Offset, p.Value, ds)
			}
		}
	}
	t.Logf("%d records: %d deliveries, %d released once and redelivered", len(produced), len(deliveries), released)
}

// setGroupConfig sets one group config with IncrementalAlterConfigs (resource type
// GROUP).
func setGroupConfig(t *testing.T, bootstrap []string, group, key, value string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceType(32), group
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = key, kmsg.StringPtr(value)
	r.Configs = append(r.Configs, cfg)
	req.Resources = append(req.Resources, r)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err == nil && resp.Resources[0].ErrorCode != 0 {
		err = fmt.Errorf("error code %d: %s", resp.Resources[0].ErrorCode, deref(resp.Resources[0].ErrorMessage))
	}
	if err != nil {
		t.Fatalf("setting %s=%s on group %s: %v", key, value, group, err)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestShareFailover kills a partition leader while Java share consumers hold
// acquired records of it (slow processing: 300ms per poll of at most 20 records) on
// a 3-node cluster (3 partitions, replication factor 3, min.insync.replicas=2). The
// new leader loads the share-partition state from __share_group_state: records whose
// acknowledgement was durable are not delivered again, the others are. Every record
// must end with exactly one acknowledgement the broker confirmed (an acceptance, or
// a rejection for key-07) and no record may be accepted twice; acknowledgements the
// failover refused (the new leader does not know the old locks) are allowed. Both
// members join before the records are written, and each must receive some (a JVM
// starved of CPU on a loaded machine can otherwise join after the other member has
// taken every record).
func TestShareFailover(t *testing.T) {
	const topic, group, rejectKey = "interop-share-failover", "interop-share-failover", "key-07"
	java, c, adm, _ := startShareCluster(t, topic, group, 0)

	j := job{
		bootstrap: strings.Join(c.Bootstrap(), ","),
		topic:     topic,
		mode:      "share",
		args: []string{"--group", group, "--reject-key", rejectKey, "--idle-ms", "10000",
			"--process-ms", "300", "--max-poll", "20"},
		timeout: 2 * time.Minute,
	}
	runs := []*clientRun{startClient(t, java, j), startClient(t, java, j)}
	waitShareMembers(t, c.Bootstrap(), group, len(runs))
	produced := produceKeyed(t, c.Bootstrap(), topic, "go", 600)

	// Once acknowledgements are being persisted, kill the leader of partition 0.
	testcluster.Eventually(t, time.Minute, "share-group state written", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, "__share_group_state")
		if err != nil {
			return err
		}
		var total int64
		ends.Each(func(l kadm.ListedOffset) { total += l.Offset })
		if total < 5 {
			return fmt.Errorf("%d state records", total)
		}
		return nil
	})
	victim := c.Leader(topic, 0)
	t.Logf("killing node %d, leader of %s-0", victim.ID, topic)
	victim.Kill()

	var deliveries []report.Delivery
	for i, r := range runs {
		s := r.wait(t)
		failed, unsent := 0, 0
		for _, d := range s.Deliveries {
			switch {
			case d.Ack == "failed:NotSent":
				unsent++
			case strings.HasPrefix(d.Ack, "failed:"):
				failed++
			}
		}
		t.Logf("share member %d (%s): %d deliveries, %d acknowledgements refused, %d never sent (the client dropped them)",
			i+1, s.Library, len(s.Deliveries), failed, unsent)
		if len(s.Deliveries) == 0 {
			t.Errorf("share member %d (%s) received no records", i+1, s.Library)
		}
		deliveries = append(deliveries, s.Deliveries...)
	}
	type pos struct {
		p int32
		o int64
	}
	done := map[pos][]string{}
	redelivered := 0
	for _, d := range deliveries {
		if !strings.HasPrefix(d.Ack, "failed:") && d.Ack != "release" {
			done[pos{d.Partition, d.Offset}] = append(done[pos{d.Partition, d.Offset}], d.Ack)
		}
		if d.DeliveryCount > 1 {
			redelivered++
		}
	}
	for _, p := range produced {
		acks := done[pos{p.Partition, p.Offset}]
		want := "accept"
		if string(p.Key) == rejectKey {
			want = "reject"
		}
		if len(acks) != 1 || acks[0] != want {
			t.Errorf("%d/%d (%s): confirmed acknowledgements %v, want one %s", p.Partition, p.Offset, p.Value, acks, want)
		}
	}
	t.Logf("%d records, %d deliveries, %d of them redeliveries", len(produced), len(deliveries), redelivered)
}

// waitShareMembers waits until share group group has n members, each with an
// assignment it has heard of: its member epoch is the group's assignment epoch
// (ShareGroupDescribe). Until a member's next heartbeat the others may still fetch
// the partitions that were taken from them for it. n < 0 waits only until the
// group is described.
func waitShareMembers(t *testing.T, bootstrap []string, group string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	what := fmt.Sprintf("%d members in share group %s", n, group)
	if n < 0 {
		what = "share group " + group + " described"
	}
	testcluster.Eventually(t, 2*time.Minute, what, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.GroupIDs = []string{group}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if len(resp.Groups) != 1 {
			return fmt.Errorf("%d groups described", len(resp.Groups))
		}
		g := resp.Groups[0]
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return err
		}
		if n < 0 {
			return nil
		}
		current := 0
		for _, m := range g.Members {
			if len(m.Assignment.TopicPartitions) > 0 && m.MemberEpoch == g.AssignmentEpoch {
				current++
			}
		}
		if current != n {
			return fmt.Errorf("%d of %d members have an assignment of epoch %d", current, len(g.Members), g.AssignmentEpoch)
		}
		return nil
	})
}
