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

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/interop/kafkatools"
)

// TestKafkaShareGroupOffsets drives the share-group offset admin APIs (90-92) with
// Kafka 4.4's kafka-share-groups against one Strata node, and checks each step on
// the tool's output and on what kafka-console-share-consumer then receives:
//
//  1. Ten records, v00-v04 stamped two hours ago and v05-v09 one hour ago; the group
//     starts at the earliest offset. A console share consumer reads (accepts) all
//     ten: --describe --offsets shows start offset 10 and lag 0.
//  2. --reset-offsets --to-earliest --execute: start offset 0 (lag 10), and all ten are
//     delivered again.
//  3. --reset-offsets --to-datetime (one hour ago): start offset 5, and
//     only v05-v09 are delivered.
//  4. --reset-offsets --to-latest, then two more records: start offset 10, and only
//     the two new ones are delivered.
//  5. --delete-offsets --topic: the partition's state goes (no row), the group starts
//     at share.auto.offset.reset again and all twelve are delivered; a topic that
//     does not exist is reported per topic.
//  6. --list shows the group, --delete deletes it, and its state is gone with it.
func TestKafkaShareGroupOffsets(t *testing.T) {
	if os.Getenv(envTarget) == "kfake" {
		t.Skip("share groups run on Strata; not with STRATA_INTEROP_TARGET=kfake")
	}
	kafkatools.Require(t)
	tgt := startTarget(t)
	const topic, group = "share-admin", "share-admin-group"
	bs := []string{"--bootstrap-server", tgt.bootstrap}
	run := func(t *testing.T, tool string, args ...string) string {
		t.Helper()
		return kafkatools.MustRun(t, tool, append(args, bs...)...)
	}
	adm := newAdmin(t, tgt.bootstrap)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	// Timestamps within the topic's retention, an hour apart.
	first := time.Now().UTC().Truncate(time.Second).Add(-2 * time.Hour)
	second := first.Add(time.Hour)
	produceAt(t, tgt.bootstrap, topic, 0, 5, first)
	produceAt(t, tgt.bootstrap, topic, 5, 5, second)
	setGroupConfig(t, []string{tgt.bootstrap}, group, "share.auto.offset.reset", "earliest")

	// consume reads n records with a console share consumer (accepting each) and
	// checks they are exactly want.
	consume := func(t *testing.T, want ...string) {
		t.Helper()
		out := run(t, "kafka-console-share-consumer", "--topic", topic, "--group", group,
			"--max-messages", strconv.Itoa(len(want)), "--timeout-ms", "60000")
		got := strings.Fields(out)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("console share consumer read %v, want %v", got, want)
		}
	}
	// startOffset is the START-OFFSET and LAG --describe --offsets shows for
	// partition 0, "" when it shows no row.
	row := regexp.MustCompile(`(?m)^` + group + `\s+` + topic + `\s+0\s+(\S+)\s+(\S+)\s*$`)
	startOffset := func(t *testing.T) string {
		t.Helper()
		out := run(t, "kafka-share-groups", "--describe", "--offsets", "--group", group)
		if m := row.FindStringSubmatch(out); m != nil {
			return m[1] + " " + m[2]
		}
		return ""
	}
	expectStart := func(t *testing.T, want string) {
		t.Helper()
		if got := startOffset(t); got != want {
			t.Fatalf("--describe --offsets shows start offset and lag %q, want %q", got, want)
		}
	}
	reset := func(t *testing.T, how ...string) string {
		t.Helper()
		return run(t, "kafka-share-groups", append([]string{"--reset-offsets", "--group", group, "--topic", topic, "--execute"}, how...)...)
	}
	values := func(from, to int) []string {
		var vs []string
		for i := from; i < to; i++ {
			vs = append(vs, fmt.Sprintf("v%02d", i))
		}
		return vs
	}

	consume(t, values(0, 10)...)
	expectStart(t, "10 0")

	out := reset(t, "--to-earliest")
	if !regexp.MustCompile(`(?m)^` + group + `\s+` + topic + `\s+0\s+0\s*$`).MatchString(out) {
		t.Errorf("--reset-offsets --to-earliest printed:\n%s", out)
	}
	expectStart(t, "0 10")
	consume(t, values(0, 10)...)
	expectStart(t, "10 0")

	reset(t, "--to-datetime", second.Format("2006-01-02T15:04:05.000"))
	expectStart(t, "5 5")
	consume(t, values(5, 10)...)

	reset(t, "--to-latest")
	expectStart(t, "10 0")
	produceAt(t, tgt.bootstrap, topic, 10, 2, time.Now())
	consume(t, values(10, 12)...)
	expectStart(t, "12 0")

	out = run(t, "kafka-share-groups", "--delete-offsets", "--group", group, "--topic", topic)
	if !regexp.MustCompile(topic + `\s+Successful`).MatchString(out) {
		t.Errorf("--delete-offsets printed:\n%s", out)
	}
	expectStart(t, "")
	consume(t, values(0, 12)...)
	expectStart(t, "12 0")
	out = run(t, "kafka-share-groups", "--delete-offsets", "--group", group, "--topic", "no-such-topic")
	if !strings.Contains(out, "no-such-topic") || !strings.Contains(out, "Error:") {
		t.Errorf("--delete-offsets of a missing topic printed:\n%s", out)
	}

	if out := run(t, "kafka-share-groups", "--list"); !slices.Contains(strings.Fields(out), group) {
		t.Errorf("--list shows:\n%s", out)
	}
	out = run(t, "kafka-share-groups", "--delete", "--group", group)
	expectContains(t, out, "Deletion of requested share groups ('"+group+"') was successful.")
	if out := run(t, "kafka-share-groups", "--list"); slices.Contains(strings.Fields(out), group) {
		t.Errorf("--list after --delete shows:\n%s", out)
	}
	if n := sharePartitionsWithState(t, tgt.bootstrap, group); n != 0 {
		t.Errorf("after --delete, DescribeShareGroupOffsets lists %d share partitions, want none", n)
	}
}

// produceAt writes n records v<first>..v<first+n-1> to partition 0 of topic, stamped ts.
func produceAt(t *testing.T, bootstrap, topic string, first, n int, ts time.Time) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rs []*kgo.Record
	for i := first; i < first+n; i++ {
		rs = append(rs, &kgo.Record{Value: fmt.Appendf(nil, "v%02d", i), Timestamp: ts})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// sharePartitionsWithState asks DescribeShareGroupOffsets for every share partition
// of group with state.
func sharePartitionsWithState(t *testing.T, bootstrap, group string) int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	g.GroupID = group
	req.Groups = append(req.Groups, g)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("DescribeShareGroupOffsets: %+v", resp.Groups)
	}
	n := 0
	for _, rt := range resp.Groups[0].Topics {
		n += len(rt.Partitions)
	}
	return n
}
