package interop

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/interop/kafkatools"
)

// TestKafkaStreamsGroupProtocol runs the word count (interop/streams) with
// group.protocol=streams (KIP-1071: the broker assigns the tasks):
//
//  1. Set the group's streams.num.standby.replicas to 1. Write 200 lines to a
//     4-partition input topic and start two instances. The first to join
//     registers the topology; Strata creates the repartition and changelog
//     topics; the 8 tasks (2 subtopologies x 4 partitions) are split 4 and 4
//     between them, each holding standby copies of the other's 4.
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
		if n != [2]int{4, 4} {
			t.Errorf("member %s has %d active and %d standby tasks, want 4 and 4: %v", member, n[0], n[1], tasks)
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
}

// awaitStreamsGroup waits until streams group id is Stable with members members,
// every one of them holding active tasks, and returns each member's count of
// active and standby tasks.
func awaitStreamsGroup(t *testing.T, cl *kgo.Client, id string, members int, apps ...*wordCount) map[string][2]int {
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
			for _, m := range g.Members {
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
			last = fmt.Sprintf("%s state=%s members=%d tasks=%v", kerr.ErrorForCode(g.ErrorCode), g.State, len(g.Members), tasks)
			if g.ErrorCode == 0 && g.State == "Stable" && len(g.Members) == members && len(tasks) == members {
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
