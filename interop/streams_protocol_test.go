package interop

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/wait"
	"github.com/strata-stream/strata/interop/kafkatools"
)

// TestKafkaStreamsGroupProtocol runs the word count (interop/streams) with
// group.protocol=streams (KIP-1071: the broker assigns the tasks):
//
//  1. Set the group's streams.num.standby.replicas to 1. Write 200 lines to a
//     4-partition input topic and start two instances. The first to join
//     registers the topology; Strata creates the repartition and changelog
//     topics; the 8 tasks (2 subtopologies x 4 partitions) are split 4 and 4
//     between them, each holding standby copies of the other's 2 stateful
//     tasks (subtopology 1 counts into a store; the stateless subtopology 0
//     gets no standbys, as in Kafka). Stateful tasks reach the second instance
//     through warm-ups (TestKafkaStreamsWarmupTasks); the group is awaited
//     without any left.
//  2. The latest count of every word on the output topic is exact.
//  3. kafka-streams-groups --list and --describe show the group and its members.
//  4. One instance stops (SIGTERM: it leaves the group); the other takes all 8
//     tasks (and no standbys: there is no other process), 60 more lines are
//     written, and the counts are exact again.
//
// It runs with at_least_once and with exactly_once_v2 (transactional offset
// commits checked against the member's epoch).
func TestKafkaStreamsGroupProtocol(t *testing.T) {
	if os.Getenv(envTarget) == "kfake" {
		t.Skip("streams groups are Strata's; not with STRATA_INTEROP_TARGET=kfake")
	}
	if _, err := os.Stat("streams/target/classes/io/strata/interop/streams/WordCount.class"); err != nil {
		requireStreams(t, "the Streams application is not built (streams/target)")
	}
	tgt := startTarget(t)
	for _, guarantee := range []string{"at_least_once", "exactly_once_v2"} {
		t.Run(guarantee, func(t *testing.T) { testStreamsProtocol(t, tgt, guarantee) })
	}
}

func testStreamsProtocol(t *testing.T, tgt *target, guarantee string) {
	app := "wordcount-streams-" + strings.ReplaceAll(guarantee, "_", "-")
	in, out := app+"-in", app+"-out"
	createTopics(t, tgt.bootstrap, 4, in, out)
	cl, err := kgo.NewClient(kgo.SeedBrokers(tgt.bootstrap), kgo.ConsumeTopics(out),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceType(32), app // GROUP
	res.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "streams.num.standby.replicas", Value: kmsg.StringPtr("1")}}
	alter.Resources = append(alter.Resources, res)
	if resp, err := alter.RequestWith(context.Background(), cl); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("setting streams.num.standby.replicas: %v %+v", err, resp)
	}
	want := map[string]int64{}
	produceLines := func(from, to int) { produceWordLines(t, cl, in, want, from, to) }
	produceLines(0, 200)

	streams := []string{"group.protocol=streams"}
	app1 := startWordCount(t, tgt.bootstrap, app, in, out, guarantee, streams...)
	app2 := startWordCount(t, tgt.bootstrap, app, in, out, guarantee, streams...)
	tasks := awaitStreamsGroup(t, cl, app, 2, app1, app2)
	for member, n := range tasks {
		if n != [2]int{4, 2} {
			t.Errorf("member %s has %d active and %d standby tasks, want 4 and 2: %v", member, n[0], n[1], tasks)
		}
	}
	counts := countsReader{cl: cl, got: map[string]int64{}}
	counts.await(t, "lines produced before the start", want, app1, app2)

	if kafkatools.Missing() == "" {
		list := kafkatools.MustRun(t, "kafka-streams-groups", "--bootstrap-server", tgt.bootstrap, "--list")
		if !strings.Contains(list, app) {
			t.Errorf("kafka-streams-groups --list does not show %s:\n%s", app, list)
		}
		desc := kafkatools.MustRun(t, "kafka-streams-groups", "--bootstrap-server", tgt.bootstrap, "--describe", "--group", app, "--members")
		if n := strings.Count(desc, "ACTIVE:"); n != 2 {
			t.Errorf("kafka-streams-groups --describe --members shows %d members with active tasks, want 2:\n%s", n, desc)
		}
		// No topology description plugin (as a Kafka 4.4 broker without one):
		// the group's description says none is stored.
		topo, err := kafkatools.Run(t.Context(), "kafka-streams-groups", "--bootstrap-server", tgt.bootstrap, "--describe", "--group", app, "--topology")
		if err != nil || topo.ExitCode != 1 || !strings.Contains(topo.Stdout, "No topology description is stored for streams group '"+app+"'") {
			t.Errorf("kafka-streams-groups --describe --topology: %v, exit %d\n%s%s", err, topo.ExitCode, topo.Stdout, topo.Stderr)
		}
	} else {
		t.Logf("kafka-streams-groups not run: %s", kafkatools.Missing())
	}

	if err := app2.stop(); err != nil {
		t.Fatal(err)
	}
	tasks = awaitStreamsGroup(t, cl, app, 1, app1)
	for member, n := range tasks {
		if n != [2]int{8, 0} {
			t.Errorf("the remaining member %s has %d active and %d standby tasks, want all 8 and none", member, n[0], n[1])
		}
	}
	produceLines(200, 260)
	counts.await(t, "lines produced after one instance stopped", want, app1)
	if err := app1.stop(); err != nil {
		t.Fatal(err)
	}
	if guarantee == "at_least_once" && kafkatools.Missing() == "" {
		t.Run("kafka-streams-groups", func(t *testing.T) { checkStreamsGroupsTool(t, tgt, cl, app, in) })
	}
}

// checkStreamsGroupsTool runs kafka-streams-groups' offset and deletion
// commands on the stopped application's group app, whose input topic is in
// (4 partitions, all read to their end): a dry-run reset, a reset to the
// earliest offsets, the deletion of in's offsets, then the group's deletion
// with its internal topics.
func checkStreamsGroupsTool(t *testing.T, tgt *target, cl *kgo.Client, app, in string) {
	adm := kadm.NewClient(cl)
	ctx := t.Context()
	committed := func() kadm.OffsetResponses {
		t.Helper()
		offsets, err := adm.FetchOffsets(ctx, app)
		if err == nil {
			err = offsets.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		return offsets
	}
	ends, err := adm.ListEndOffsets(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if c, ok := committed().Lookup(in, o.Partition); !ok || c.At != o.Offset {
			t.Errorf("the stopped application's offset of %s-%d: %+v, want its end %d", in, o.Partition, c, o.Offset)
		}
	})
	// The group is Empty once the last instance's leave is handled.
	wait.Eventually(t, time.Minute, app+" to be Empty", func() error {
		out := kafkatools.MustRun(t, "kafka-streams-groups", "--bootstrap-server", tgt.bootstrap, "--list", "--state")
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == app {
				if f[1] != "Empty" {
					return fmt.Errorf("%s is %s", app, f[1])
				}
				return nil
			}
		}
		return fmt.Errorf("%s not listed:\n%s", app, out)
	})

	tool := func(args ...string) string {
		return kafkatools.MustRun(t, "kafka-streams-groups", append([]string{"--bootstrap-server", tgt.bootstrap, "--group", app}, args...)...)
	}
	dry := tool("--reset-offsets", "--input-topic", in, "--to-earliest", "--dry-run")
	if n := strings.Count(dry, in); n != 4 {
		t.Errorf("--reset-offsets --dry-run lists %d partitions of %s, want 4:\n%s", n, in, dry)
	}
	ends.Each(func(o kadm.ListedOffset) { // unchanged by the dry run
		if c, _ := committed().Lookup(in, o.Partition); c.At != o.Offset {
			t.Errorf("after --dry-run the offset of %s-%d is %d, want %d still", in, o.Partition, c.At, o.Offset)
		}
	})
	tool("--reset-offsets", "--input-topic", in, "--to-earliest", "--execute")
	for p := range int32(4) {
		if c, ok := committed().Lookup(in, p); !ok || c.At != 0 {
			t.Errorf("after --reset-offsets --to-earliest --execute the offset of %s-%d is %+v, want 0", in, p, c)
		}
	}
	tool("--delete-offsets", "--input-topic", in)
	for p := range int32(4) {
		if c, ok := committed().Lookup(in, p); ok && c.At >= 0 {
			t.Errorf("after --delete-offsets %s-%d still has offset %d", in, p, c.At)
		}
	}

	internal := func() []string {
		t.Helper()
		topics, err := adm.ListTopics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, name := range topics.Names() {
			if strings.HasPrefix(name, app+"-") && name != in && name != strings.TrimSuffix(in, "-in")+"-out" {
				names = append(names, name)
			}
		}
		return names
	}
	if len(internal()) == 0 {
		t.Fatalf("the application made no internal topic (%s-...)", app)
	}
	tool("--delete", "--delete-all-internal-topics")
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(groups.Groups(), app) {
		t.Errorf("%s is still listed after --delete", app)
	}
	wait.Eventually(t, time.Minute, app+"'s internal topics deleted", func() error {
		if left := internal(); len(left) > 0 {
			return fmt.Errorf("left: %v", left)
		}
		return nil
	})
}

// awaitStreamsGroup waits until streams group id is Stable with members members,
// every one of them holding active tasks, and no warm-up task left (no task
// waiting to move), and returns each member's count of active and standby
// tasks.
func awaitStreamsGroup(t *testing.T, cl *kgo.Client, id string, members int, apps ...*javaApp) map[string][2]int {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	var last string
	for {
		req := kmsg.NewPtrStreamsGroupDescribeRequest()
		req.Groups = []string{id}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := req.RequestWith(ctx, cl)
		cancel()
		if err == nil && len(resp.Groups) == 1 {
			g := resp.Groups[0]
			tasks := map[string][2]int{}
			warmups := 0
			for _, m := range g.Members {
				for _, ts := range m.Assignment.WarmupTasks {
					warmups += len(ts.Partitions)
				}
				var n [2]int
				for _, ts := range m.Assignment.ActiveTasks {
					n[0] += len(ts.Partitions)
				}
				for _, ts := range m.Assignment.StandbyTasks {
					n[1] += len(ts.Partitions)
				}
				if n[0] > 0 {
					tasks[m.MemberID] = n
				}
			}
			last = fmt.Sprintf("%s state=%s members=%d tasks=%v warmups=%d", kerr.ErrorForCode(g.ErrorCode), g.State, len(g.Members), tasks, warmups)
			if g.ErrorCode == 0 && g.State == "Stable" && len(g.Members) == members && len(tasks) == members && warmups == 0 {
				return tasks
			}
		} else if err != nil {
			last = err.Error()
		}
		for _, app := range apps {
			if app.exited() {
				t.Fatalf("a Streams instance exited early\n%s", app.output())
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("streams group %s never became Stable with %d members holding tasks: last %s\n%s", id, members, last, apps[0].output())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestKafkaStreamsWarmupTasks shows warm-up tasks with a real Kafka Streams 4.4
// application (the word count: subtopology 0 is stateless, subtopology 1 counts
// into a state store logged to a changelog):
//
//  1. One instance runs all 8 tasks and counts 300 lines.
//  2. A second instance (another process, an empty state directory) joins. The
//     target gives it half the tasks; the stateless ones move at once, but each
//     stateful one first runs there as a warm-up task, restoring the store from
//     the changelog, while the first instance keeps processing it. Only once the
//     second instance reports (in its heartbeat's task offsets) that it has
//     caught up does the task move.
//  3. Every stateful task the second instance ends up running was seen as its
//     warm-up first; the group ends Stable, 4 and 4, no warm-ups left, and the
//     counts are exact after 60 more lines.
func TestKafkaStreamsWarmupTasks(t *testing.T) {
	if os.Getenv(envTarget) == "kfake" {
		t.Skip("streams groups are Strata's; not with STRATA_INTEROP_TARGET=kfake")
	}
	if _, err := os.Stat("streams/target/classes/io/strata/interop/streams/WordCount.class"); err != nil {
		requireStreams(t, "the Streams application is not built (streams/target)")
	}
	tgt := startTarget(t)
	const app = "wordcount-warmup"
	in, out := app+"-in", app+"-out"
	createTopics(t, tgt.bootstrap, 4, in, out)
	cl, err := kgo.NewClient(kgo.SeedBrokers(tgt.bootstrap), kgo.ConsumeTopics(out),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	want := map[string]int64{}
	produceWordLines(t, cl, in, want, 0, 300)

	streams := []string{"group.protocol=streams"}
	app1 := startWordCount(t, tgt.bootstrap, app, in, out, "at_least_once", streams...)
	first := awaitStreamsGroup(t, cl, app, 1, app1)
	counts := countsReader{cl: cl, got: map[string]int64{}}
	counts.await(t, "lines produced before the start", want, app1)

	app2 := startWordCount(t, tgt.bootstrap, app, in, out, "at_least_once", streams...)
	warmedUp := map[string]bool{} // tasks seen as the new member's warm-ups
	offsetsSeen := false
	var toolOut string
	deadline := time.Now().Add(3 * time.Minute)
	for {
		g := describeStreamsGroup(t, cl, app)
		stateful := map[string]bool{}
		if g.Topology != nil {
			for _, s := range g.Topology.Subtopologies {
				stateful[s.SubtopologyID] = len(s.StateChangelogTopics) > 0
			}
		}
		var newcomer *kmsg.StreamsGroupDescribeResponseGroupMember
		for i := range g.Members {
			if _, ok := first[g.Members[i].MemberID]; !ok {
				newcomer = &g.Members[i]
			}
		}
		done := false
		if newcomer != nil {
			active := map[string]bool{}
			for _, ts := range newcomer.Assignment.ActiveTasks {
				for _, p := range ts.Partitions {
					active[fmt.Sprintf("%s_%d", ts.SubtopologyID, p)] = true
				}
			}
			for _, ts := range newcomer.Assignment.WarmupTasks {
				for _, p := range ts.Partitions {
					task := fmt.Sprintf("%s_%d", ts.SubtopologyID, p)
					if active[task] {
						t.Errorf("task %s is both active and warming up on the new member", task)
					}
					if !warmedUp[task] && toolOut == "" && kafkatools.Missing() == "" {
						toolOut = kafkatools.MustRun(t, "kafka-streams-groups", "--bootstrap-server", tgt.bootstrap,
							"--describe", "--group", app, "--members", "--verbose")
					}
					warmedUp[task] = true
				}
			}
			offsetsSeen = offsetsSeen || len(newcomer.TaskOffsets) > 0
			for task := range active {
				if sub, _, _ := strings.Cut(task, "_"); stateful[sub] && !warmedUp[task] {
					t.Fatalf("stateful task %s became active on the new member without a warm-up first (warm-ups seen: %v)", task, warmedUp)
				}
			}
			n := [2]int{}
			for _, m := range g.Members {
				for _, ts := range m.Assignment.ActiveTasks {
					if m.MemberID == newcomer.MemberID {
						n[1] += len(ts.Partitions)
					} else {
						n[0] += len(ts.Partitions)
					}
				}
			}
			warmups := 0
			for _, m := range g.Members {
				for _, ts := range m.Assignment.WarmupTasks {
					warmups += len(ts.Partitions)
				}
			}
			done = g.State == "Stable" && n == [2]int{4, 4} && warmups == 0
		}
		if done {
			break
		}
		for _, a := range []*javaApp{app1, app2} {
			if a.exited() {
				t.Fatalf("a Streams instance exited early\n%s", a.output())
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group never settled 4 and 4 without warm-ups: %s, warm-ups seen %v\n%s", g.State, warmedUp, app2.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(warmedUp) == 0 {
		t.Fatal("no warm-up task was seen before the stateful tasks moved")
	}
	if !offsetsSeen {
		t.Error("the new member never reported task offsets")
	}
	t.Logf("warm-up tasks seen on the new member before they moved: %v", slices.Sorted(maps.Keys(warmedUp)))
	if toolOut != "" {
		t.Logf("kafka-streams-groups --describe --members --verbose during the warm-up:\n%s", toolOut)
		if !strings.Contains(toolOut, "WARMUP") {
			t.Errorf("kafka-streams-groups --describe --members --verbose shows no WARMUP column:\n%s", toolOut)
		}
	}
	produceWordLines(t, cl, in, want, 300, 360)
	counts.await(t, "lines produced after the warm-up", want, app1, app2)
	for _, a := range []*javaApp{app2, app1} {
		if err := a.stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// describeStreamsGroup describes one streams group (an empty answer on error).
func describeStreamsGroup(t *testing.T, cl *kgo.Client, id string) kmsg.StreamsGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrStreamsGroupDescribeRequest()
	req.Groups = []string{id}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Groups) != 1 {
		return kmsg.NewStreamsGroupDescribeResponseGroup()
	}
	return resp.Groups[0]
}
