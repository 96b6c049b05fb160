package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/testcluster"
	"github.com/strata-stream/strata/interop/kafkatools"
	"github.com/strata-stream/strata/interop/report"
)

// TestConsumerProtocol runs the KIP-848 consumer group protocol
// (group.protocol=consumer) with two Java clients and a franz-go client in one group
// on a 3-node Strata cluster:
//
//  1. Start the cluster; create a topic of 3 partitions, replication factor 3.
//  2. A franz-go member (kgo.ServerSideBalancer) and two Java members
//     (--group-protocol consumer) join; wait until ConsumerGroupDescribe shows the
//     group Stable with three members owning one partition each.
//  3. Write 200 keyed records with franz-go. Each Java member reads its partition and
//     leaves once the group has committed every end offset.
//  4. Wait until the franz-go member owns all three partitions, write 200 more, and
//     let it read them.
//  5. Kafka 4.4's kafka-consumer-groups describes the group (offsets and lag, --state
//     with the uniform assignor, --members with epochs and assignments) and lists it as
//     a consumer group.
//     Strata's own front doors, `strata group describe` and the HTTP API's
//     GET /groups/{group} on every node, describe the group the same way, as
//     they do in step 2 with the two Java members in it.
//  6. report.CheckGroup over the three members' reads: every record read exactly once,
//     by the member owning its partition at the time; the end offsets are committed.
func TestConsumerProtocol(t *testing.T) {
	if os.Getenv(envTarget) == "kfake" {
		t.Skip("runs on a Strata cluster; not with STRATA_INTEROP_TARGET=kfake")
	}
	java := clientNamed(t, "java")
	requireClient(t, java)
	t.Setenv(testcluster.BinaryEnv, strataBinary(t))
	c := testcluster.Start(t, 3)
	adm := newAdmin(t, c.Bootstrap()...)
	const topic, group = "interop-kip848", "interop-kip848"
	createReplicatedTopic(t, c, adm, topic)

	fr := startKIP848Member(t, c.Bootstrap(), group, topic)
	j := job{
		bootstrap: strings.Join(c.Bootstrap(), ","),
		topic:     topic,
		mode:      "group",
		args:      []string{"--group", group, "--group-protocol", "consumer"},
		timeout:   2 * time.Minute,
	}
	javas := []*clientRun{startClient(t, java, j), startClient(t, java, j)}
	waitConsumerGroup(t, adm, group, topic, 3)
	t.Run("strata describes the Java members", func(t *testing.T) {
		// Nothing is written yet: the Java members wait for records, each owning
		// one partition, at its end offset 0.
		strataDescribes(t, c, group, topic, func(g frontDoorGroup) error {
			return g.check(map[string]int{javaGroupClient: 2, franzGoGroupClient: 1}, func(o frontDoorOffset) error {
				if o.Committed > 0 || o.End != 0 || o.Lag != 0 {
					return fmt.Errorf("%+v, want end 0 and lag 0", o)
				}
				return nil
			})
		})
	})

	produced := produceKeyed(t, c.Bootstrap(), topic, "go-a", records)
	var javaReads []report.Summary
	for _, r := range javas {
		javaReads = append(javaReads, *r.wait(t))
	}
	waitConsumerGroup(t, adm, group, topic, 1)
	produced = append(produced, produceKeyed(t, c.Bootstrap(), topic, "go-b", records)...)
	want := map[[2]int64]bool{}
	for _, p := range produced {
		want[[2]int64{int64(p.Partition), p.Offset}] = true
	}
	testcluster.Eventually(t, time.Minute, "the franz-go member read everything after the Java members left", func() error {
		got := map[[2]int64]bool{}
		for _, s := range javaReads {
			for _, r := range s.Consumed {
				got[[2]int64{int64(r.Partition), r.Offset}] = true
			}
		}
		for _, r := range fr.reads() {
			got[[2]int64{int64(r.Partition), r.Offset}] = true
		}
		if len(got) < len(want) {
			return fmt.Errorf("%d of %d records read", len(got), len(want))
		}
		return nil
	})
	t.Run("kafka-consumer-groups", func(t *testing.T) {
		kafkatools.Require(t)
		bs := []string{"--bootstrap-server", strings.Join(c.Bootstrap(), ",")}
		run := func(args ...string) string {
			return kafkatools.MustRun(t, "kafka-consumer-groups", append(args, bs...)...)
		}
		testcluster.Eventually(t, 30*time.Second, "kafka-consumer-groups to show the member caught up", func() error {
			out := run("--describe", "--group", group)
			for p := range partitions {
				re := regexp.MustCompile(fmt.Sprintf(`(?m)^%s +%s +%d +\d+ +\d+ +0 +\S+ +/127\.0\.0\.\d+ +%s *$`, group, topic, p, franzGoGroupClient))
				if !re.MatchString(out) {
					return fmt.Errorf("no caught-up row for partition %d:\n%s", p, out)
				}
			}
			return nil
		})
		out := run("--describe", "--group", group, "--state")
		if !regexp.MustCompile(`(?m)^` + group + ` +\S+ +\(\d+\) +uniform +Stable +1 *$`).MatchString(out) {
			t.Errorf("--state shows:\n%s", out)
		}
		out = run("--describe", "--group", group, "--members", "--verbose")
		if !strings.Contains(out, franzGoGroupClient) || !strings.Contains(out, topic+":0,1,2") {
			t.Errorf("--members shows:\n%s", out)
		}
		t.Logf("kafka-consumer-groups --describe --members --verbose:\n%s", out)
		if out := run("--list", "--type", "consumer"); !strings.Contains(out, group) {
			t.Errorf("--list --type consumer shows:\n%s", out)
		}
	})
	t.Run("strata group describe and GET /groups", func(t *testing.T) {
		strataDescribes(t, c, group, topic, func(g frontDoorGroup) error {
			ends := int64(0)
			err := g.check(map[string]int{franzGoGroupClient: 1}, func(o frontDoorOffset) error {
				ends += o.End
				if o.Committed != o.End || o.Lag != 0 {
					return fmt.Errorf("%+v, want its end committed and lag 0", o)
				}
				return nil
			})
			if err == nil && ends != int64(len(produced)) {
				err = fmt.Errorf("end offsets sum to %d, want the %d records written", ends, len(produced))
			}
			return err
		})
	})
	fr.close()

	members := map[string][]report.Consumed{"franz-go": fr.reads()}
	for i, s := range javaReads {
		members[fmt.Sprintf("java-%d", i+1)] = s.Consumed
		t.Logf("java member %d read %d records, assignments %v", i+1, len(s.Consumed), s.Assignments)
	}
	t.Logf("franz-go member read %d records", len(members["franz-go"]))
	for _, err := range report.CheckGroup(partitions, produced, members) {
		t.Error(err)
	}
	waitCommittedAtEnd(t, adm, group, topic, 30*time.Second)
}

// waitConsumerGroup waits until ConsumerGroupDescribe shows group Stable with n
// members, each at the group epoch, owning the topic's partitions between them.
func waitConsumerGroup(t *testing.T, adm *kadm.Client, group, topic string, n int) {
	t.Helper()
	testcluster.Eventually(t, 90*time.Second, fmt.Sprintf("consumer group %s stable with %d members", group, n), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ds, err := adm.DescribeConsumerGroups(ctx, group)
		if err != nil {
			return err
		}
		d := ds[group]
		switch {
		case d.Err != nil:
			return d.Err
		case d.State != "Stable":
			return fmt.Errorf("state %s", d.State)
		case len(d.Members) != n:
			return fmt.Errorf("%d members", len(d.Members))
		}
		owned := 0
		for _, m := range d.Members {
			if m.MemberEpoch != d.Epoch {
				return fmt.Errorf("member %s at epoch %d, group at %d", m.MemberID, m.MemberEpoch, d.Epoch)
			}
			owned += len(m.Assignment[topic])
		}
		if owned != partitions {
			return fmt.Errorf("%d of %d partitions owned", owned, partitions)
		}
		return nil
	})
}

// produceKeyed writes n records with keys key-00..key-19 and values prefix-NNNN
// (acks=all, idempotent), ten at a time, and returns them as acknowledged.
func produceKeyed(t *testing.T, bootstrap []string, topic, prefix string, n int) []report.Produced {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "key-%02d", i%keys), Value: fmt.Appendf(nil, "%s-%04d", prefix, i)})
	}
	// Ten records at a time: small batches, as a steady producer writes them.
	for chunk := range slices.Chunk(rs, 10) {
		if err := cl.ProduceSync(ctx, chunk...).FirstErr(); err != nil {
			t.Fatalf("producing: %v", err)
		}
	}
	out := make([]report.Produced, len(rs))
	for i, r := range rs {
		out[i] = report.Produced{Key: r.Key, Value: r.Value, Partition: r.Partition, Offset: r.Offset}
	}
	return out
}

// kip848Member is a franz-go consumer in a KIP-848 group, recording its reads.
type kip848Member struct {
	cl   *kgo.Client
	done chan struct{}
	once sync.Once
	mu   sync.Mutex
	read []report.Consumed
}

func startKIP848Member(t *testing.T, bootstrap []string, group, topic string) *kip848Member {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(bootstrap...),
		kgo.ClientID(franzGoGroupClient),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ServerSideBalancer(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.AutoCommitInterval(200*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	m := &kip848Member{cl: cl, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			fs.EachError(func(topic string, p int32, err error) {
				if !errors.Is(err, context.Canceled) {
					t.Logf("franz-go member: %s/%d: %v", topic, p, err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				m.mu.Lock()
				m.read = append(m.read, report.Consumed{Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value})
				m.mu.Unlock()
			})
		}
	}()
	t.Cleanup(m.close)
	return m
}

// close commits what was read and leaves the group.
func (m *kip848Member) close() {
	m.once.Do(func() {
		m.cl.Close()
		<-m.done
	})
}

func (m *kip848Member) reads() []report.Consumed {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.read)
}

// Client ids of the group's members: the franz-go member's, and the Java
// members' (GroupReader: strata-interop-<name>-group).
const (
	franzGoGroupClient = "strata-interop-franz-go-group"
	javaGroupClient    = "strata-interop-java-group"
)

// frontDoorGroup is a group as one of Strata's front doors describes it, in
// the fields that `strata group describe --output json` and the HTTP API's
// GET /groups/{group} both write, for one topic.
type frontDoorGroup struct {
	door    string // which front door described it
	State   string
	Members []frontDoorMember
	Offsets []frontDoorOffset // by partition
}

type frontDoorMember struct {
	MemberID, ClientID string
	Partitions         []int32
}

type frontDoorOffset struct {
	Partition           int32
	Committed, End, Lag int64 // -1: none, or unknown
	MemberID            string
}

// check says what is wrong with g, if anything: it must be Stable, with as
// many members of each client id as clients says, each owning partitions of
// its own, together all of the topic's; a row per partition naming its owner;
// and each row as offset wants it.
func (g frontDoorGroup) check(clients map[string]int, offset func(frontDoorOffset) error) error {
	if g.State != "Stable" {
		return fmt.Errorf("%s: state %q", g.door, g.State)
	}
	owner := map[int32]string{}
	got := map[string]int{}
	for _, m := range g.Members {
		got[m.ClientID]++
		if len(m.Partitions) == 0 {
			return fmt.Errorf("%s: member %+v owns no partition", g.door, m)
		}
		for _, p := range m.Partitions {
			if owner[p] != "" {
				return fmt.Errorf("%s: partition %d owned by %s and %s", g.door, p, owner[p], m.MemberID)
			}
			owner[p] = m.MemberID
		}
	}
	if !maps.Equal(got, clients) {
		return fmt.Errorf("%s: members %+v, want clients %v", g.door, g.Members, clients)
	}
	if len(owner) != partitions || len(g.Offsets) != partitions {
		return fmt.Errorf("%s: %d partitions owned, %d rows: %+v", g.door, len(owner), len(g.Offsets), g.Offsets)
	}
	for i, o := range g.Offsets {
		if o.Partition != int32(i) || o.MemberID != owner[o.Partition] {
			return fmt.Errorf("%s: row %d %+v, want partition %d owned by %q", g.door, i, o, i, owner[int32(i)])
		}
		if err := offset(o); err != nil {
			return fmt.Errorf("%s: partition %d: %w", g.door, o.Partition, err)
		}
	}
	return nil
}

// strataDescribes waits until `strata group describe` and every node's
// GET /groups/{group} describe group, with its offsets in topic, as want
// accepts.
func strataDescribes(t *testing.T, c *testcluster.Cluster, group, topic string, want func(frontDoorGroup) error) {
	t.Helper()
	bin := strataBinary(t)
	testcluster.Eventually(t, 30*time.Second, "Strata's front doors to describe group "+group, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		g, err := cliDescribe(ctx, bin, c.Bootstrap(), group, topic)
		if err == nil {
			err = want(g)
		}
		for _, n := range c.Nodes() {
			if err != nil {
				return err
			}
			if g, err = httpDescribe(ctx, n.HTTPAddr, group, topic); err == nil {
				err = want(g)
			}
		}
		return err
	})
}

// cliDescribe runs `strata group describe GROUP --output json`.
func cliDescribe(ctx context.Context, bin string, bootstrap []string, group, topic string) (frontDoorGroup, error) {
	g := frontDoorGroup{door: "strata group describe"}
	cmd := exec.CommandContext(ctx, bin, "group", "describe", group, "--brokers", strings.Join(bootstrap, ","), "--output", "json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return g, fmt.Errorf("%s: %v: %s", g.door, err, stderr.Bytes())
	}
	var described []struct {
		State   string `json:"state"`
		Members []struct {
			MemberID   string             `json:"member_id"`
			ClientID   string             `json:"client_id"`
			Assignment map[string][]int32 `json:"assignment"`
		} `json:"members"`
		Offsets []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Committed int64  `json:"committed"`
			End       int64  `json:"end"`
			Lag       int64  `json:"lag"`
			MemberID  string `json:"member_id"`
			Error     string `json:"error"`
		} `json:"offsets"`
	}
	if err := json.Unmarshal(out, &described); err != nil || len(described) != 1 {
		return g, fmt.Errorf("%s: %v: %s", g.door, err, out)
	}
	d := described[0]
	g.State = d.State
	for _, m := range d.Members {
		g.Members = append(g.Members, frontDoorMember{m.MemberID, m.ClientID, m.Assignment[topic]})
	}
	for _, o := range d.Offsets {
		if o.Error != "" {
			return g, fmt.Errorf("%s: %s-%d: %s", g.door, o.Topic, o.Partition, o.Error)
		}
		if o.Topic == topic {
			g.Offsets = append(g.Offsets, frontDoorOffset{o.Partition, o.Committed, o.End, o.Lag, o.MemberID})
		}
	}
	return g, nil
}

// httpDescribe asks the node at httpAddr for GET /groups/{group}.
func httpDescribe(ctx context.Context, httpAddr, group, topic string) (frontDoorGroup, error) {
	g := frontDoorGroup{door: "GET /groups/" + group + " on " + httpAddr}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+"/groups/"+url.PathEscape(group), nil)
	if err != nil {
		return g, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return g, fmt.Errorf("%s: %w", g.door, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return g, fmt.Errorf("%s: %d %v: %s", g.door, resp.StatusCode, err, body)
	}
	var d struct {
		State   string `json:"state"`
		Members []struct {
			MemberID   string `json:"member_id"`
			ClientID   string `json:"client_id"`
			Assignment []struct {
				Topic      string  `json:"topic"`
				Partitions []int32 `json:"partitions"`
			} `json:"assignment"`
		} `json:"members"`
		Offsets []struct {
			Topic         string `json:"topic"`
			Partition     int32  `json:"partition"`
			Committed     *int64 `json:"committed"`
			HighWatermark *int64 `json:"high_watermark"`
			Lag           *int64 `json:"lag"`
			MemberID      string `json:"member_id"`
		} `json:"offsets"`
	}
	if err := json.Unmarshal(body, &d); err != nil {
		return g, fmt.Errorf("%s: %v: %s", g.door, err, body)
	}
	g.State = d.State
	for _, m := range d.Members {
		fm := frontDoorMember{MemberID: m.MemberID, ClientID: m.ClientID}
		for _, a := range m.Assignment {
			if a.Topic == topic {
				fm.Partitions = a.Partitions
			}
		}
		g.Members = append(g.Members, fm)
	}
	orNone := func(v *int64) int64 {
		if v == nil {
			return -1
		}
		return *v
	}
	for _, o := range d.Offsets {
		if o.Topic == topic {
			g.Offsets = append(g.Offsets, frontDoorOffset{o.Partition, orNone(o.Committed), orNone(o.HighWatermark), orNone(o.Lag), o.MemberID})
		}
	}
	return g, nil
}
