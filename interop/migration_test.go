package interop

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/testcluster"
	"github.com/strata-stream/strata/interop/kafkatools"
	"github.com/strata-stream/strata/interop/report"
)

// TestGroupProtocolMigration runs KIP-848's online migration with the Java client:
// a classic member (group.protocol=classic) and a KIP-848 member
// (group.protocol=consumer) in one group.
//
//  1. Create a topic of 3 partitions; a classic Java member joins the group and
//     holds all three (DescribeGroups: Stable, one member).
//  2. A KIP-848 Java member joins: the group is upgraded, and ConsumerGroupDescribe
//     shows it Stable with both members (one of member type classic) owning the
//     partitions between them. kafka-consumer-groups --describe --members shows both.
//  3. Write 200 keyed records; both read. The KIP-848 member leaves once the group
//     has committed every end offset.
//  4. The group goes back to the classic protocol and its remaining member holds
//     all three partitions (DescribeGroups: Stable, one member, three partitions).
//  5. Write 200 more; the classic member reads them and leaves.
//  6. report.CheckGroup over both members' reads: every record read exactly once.
func TestGroupProtocolMigration(t *testing.T) {
	tgt := startTarget(t)
	if tgt.name != "strata" {
		t.Skip("checks Strata's online migration")
	}
	java := clientNamed(t, "java")
	requireClient(t, java)
	const topic, group = "interop-migration", "interop-migration"
	bootstrap := []string{tgt.bootstrap}
	adm := newAdmin(t, bootstrap...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	run := func(name, protocol string, count int) *clientRun {
		return startClient(t, java, job{
			bootstrap: tgt.bootstrap,
			topic:     topic,
			mode:      "group",
			args: []string{"--group", group, "--group-protocol", protocol,
				"--name", name, "--count", strconv.Itoa(count)},
			timeout: 3 * time.Minute,
		})
	}

	classic := run("classic", "classic", 2*records)
	waitClassicGroup(t, adm, group, topic)

	kip848 := run("kip848", "consumer", records)
	raw, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	testcluster.Eventually(t, 90*time.Second, "the group upgraded, with a classic and a KIP-848 member sharing the partitions", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Version = 1
		req.Groups = []string{group}
		resp, err := req.RequestWith(ctx, raw)
		if err != nil {
			return err
		}
		g := resp.Groups[0]
		if g.ErrorCode != 0 || g.State != "Stable" || len(g.Members) != 2 {
			return fmt.Errorf("group %s, state %s, %d members", deref(g.ErrorMessage), g.State, len(g.Members))
		}
		var types []int8
		owned := 0
		for _, m := range g.Members {
			types = append(types, m.MemberType)
			for _, tp := range m.Assignment.TopicPartitions {
				owned += len(tp.Partitions)
			}
			if len(m.Assignment.TopicPartitions) == 0 {
				return fmt.Errorf("member %s (%s) owns nothing", m.MemberID, m.ClientID)
			}
		}
		slices.Sort(types)
		if !slices.Equal(types, []int8{0, 1}) || owned != partitions {
			return fmt.Errorf("member types %v, %d of %d partitions owned", types, owned, partitions)
		}
		return nil
	})
	t.Run("kafka-consumer-groups", func(t *testing.T) {
		kafkatools.Require(t)
		out := kafkatools.MustRun(t, "kafka-consumer-groups", "--bootstrap-server", tgt.bootstrap,
			"--describe", "--group", group, "--members", "--verbose")
		t.Logf("kafka-consumer-groups --describe --members --verbose:\n%s", out)
		for _, id := range []string{"strata-interop-classic-group", "strata-interop-kip848-group"} {
			if !strings.Contains(out, id) {
				t.Errorf("--members does not show %s", id)
			}
		}
	})

	produced := produceKeyed(t, bootstrap, topic, "go-a", records)
	kip848Reads := kip848.wait(t)
	waitClassicGroup(t, adm, group, topic)
	produced = append(produced, produceKeyed(t, bootstrap, topic, "go-b", records)...)
	classicReads := classic.wait(t)

	t.Logf("classic member read %d records, assignments %v", len(classicReads.Consumed), classicReads.Assignments)
	t.Logf("KIP-848 member read %d records, assignments %v", len(kip848Reads.Consumed), kip848Reads.Assignments)
	if len(kip848Reads.Consumed) == 0 {
		t.Error("the KIP-848 member read nothing")
	}
	if n := len(classicReads.Assignments); n == 0 || len(classicReads.Assignments[n-1]) != partitions {
		t.Errorf("the classic member's last assignment is not every partition: %v", classicReads.Assignments)
	}
	members := map[string][]report.Consumed{"classic": classicReads.Consumed, "kip848": kip848Reads.Consumed}
	for _, err := range report.CheckGroup(partitions, produced, members) {
		t.Error(err)
	}
}

// waitClassicGroup waits until group is a Stable classic group of one member
// holding every partition of topic.
func waitClassicGroup(t *testing.T, adm *kadm.Client, group, topic string) {
	t.Helper()
	testcluster.Eventually(t, 90*time.Second, "a classic group of one member holding every partition", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		gs, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return err
		}
		g := gs[group]
		if g.State != "Stable" || len(g.Members) != 1 {
			return fmt.Errorf("state %s, %d members", g.State, len(g.Members))
		}
		a, ok := g.Members[0].Assigned.AsConsumer()
		if !ok {
			return fmt.Errorf("no consumer assignment")
		}
		for _, at := range a.Topics {
			if at.Topic == topic && len(at.Partitions) == partitions {
				return nil
			}
		}
		return fmt.Errorf("assignment %v", a.Topics)
	})
}
