package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/wait"
)

// member is one franz-go group consumer whose current assignment the test watches.
type member struct {
	cl       *kgo.Client
	net      *cuttableDialer
	mu       sync.Mutex
	assigned map[int32]bool
	revoked  []int32 // every partition ever revoked or lost, in order
	records  []*kgo.Record
	stop     chan struct{}
	done     chan struct{}
}

// joinGroup starts a group member that polls continuously and records what it reads.
func joinGroup(t *testing.T, addr, groupID, topic string, opts ...kgo.Opt) *member {
	t.Helper()
	m := &member{assigned: map[int32]bool{}, stop: make(chan struct{}), done: make(chan struct{}), net: &cuttableDialer{}}
	base := []kgo.Opt{
		kgo.Dialer(m.net.dial),
		kgo.SeedBrokers(addr), kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(500 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			m.mu.Lock()
			for _, p := range a[topic] {
				m.assigned[p] = true
			}
			m.mu.Unlock()
		}),
		kgo.OnPartitionsRevoked(m.lose(topic)),
		kgo.OnPartitionsLost(m.lose(topic)),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	go func() {
		defer close(m.done)
		for {
			select {
			case <-m.stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			fs := cl.PollFetches(ctx)
			cancel()
			m.mu.Lock()
			m.records = append(m.records, fs.Records()...)
			m.mu.Unlock()
		}
	}()
	t.Cleanup(func() { m.leave() })
	return m
}

func (m *member) lose(topic string) func(context.Context, *kgo.Client, map[string][]int32) {
	return func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, p := range r[topic] {
			delete(m.assigned, p)
			m.revoked = append(m.revoked, p)
		}
	}
}

func (m *member) revocations() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.revoked)
}

func (m *member) partitions() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ps []int32
	for p := range m.assigned {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// leave stops polling and closes the client (a clean LeaveGroup).
func (m *member) leave() {
	select {
	case <-m.stop:
		return
	default:
	}
	close(m.stop)
	<-m.done
	m.cl.Close()
}

// kill cuts the member's network first, so it cannot send LeaveGroup: the
// coordinator must notice it is gone through its session timeout.
func (m *member) kill() {
	select {
	case <-m.stop:
		return
	default:
	}
	m.net.cut()
	close(m.stop)
	<-m.done
	go m.cl.Close() // fails to leave: the network is gone
}

// cuttableDialer dials TCP until cut, then refuses and closes what it dialed.
type cuttableDialer struct {
	mu    sync.Mutex
	dead  bool
	conns []net.Conn
}

func (d *cuttableDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		return nil, errors.New("network cut")
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, host)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *cuttableDialer) cut() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dead = true
	for _, c := range d.conns {
		c.Close()
	}
}

// balanced reports whether members own every partition exactly once, each sizes[i].
func balanced(members []*member, partitions int, sizes ...int) (bool, string) {
	owner := map[int32]int{}
	var desc []string
	for i, m := range members {
		ps := m.partitions()
		desc = append(desc, fmt.Sprint(ps))
		if sizes != nil && len(ps) != sizes[i] {
			return false, fmt.Sprint(desc)
		}
		for _, p := range ps {
			if _, dup := owner[p]; dup {
				return false, "overlap: " + fmt.Sprint(desc)
			}
			owner[p] = i
		}
	}
	return len(owner) == partitions, fmt.Sprint(desc)
}

func waitBalanced(t *testing.T, what string, members []*member, partitions int, sizes ...int) {
	t.Helper()
	wait.Eventually(t, 30*time.Second, what+": a balanced assignment", func() error {
		if ok, desc := balanced(members, partitions, sizes...); !ok {
			return errors.New(desc)
		}
		return nil
	})
}

func groupNode(t *testing.T) (*testNode, *kadm.Client) {
	t.Helper()
	cfg := nodeConfig(t.TempDir())
	cfg.GroupInitialDelay = 0
	cfg.OffsetsTopicPartition = 5
	n := startNode(t, cfg)
	_, adm := n.client(t)
	return n, adm
}

// TestGroupAssignmentSpreads: three members of a group split twelve partitions four
// each with no overlap; a fourth joins and the assignment spreads to three each; a
// member killed without leaving is evicted after its session timeout and the others
// take its partitions.
func TestGroupAssignmentSpreads(t *testing.T) {
	n, adm := groupNode(t)
	if _, err := adm.CreateTopic(context.Background(), 12, 1, nil, "g12"); err != nil {
		t.Fatal(err)
	}
	var ms []*member
	for i := 0; i < 3; i++ {
		ms = append(ms, joinGroup(t, n.KafkaAddr(), "spread", "g12"))
	}
	waitBalanced(t, "three members", ms, 12, 4, 4, 4)
	ms = append(ms, joinGroup(t, n.KafkaAddr(), "spread", "g12"))
	waitBalanced(t, "four members", ms, 12, 3, 3, 3, 3)
	ms[3].kill()
	waitBalanced(t, "after eviction", ms[:3], 12, 4, 4, 4)
}

// TestGroupCommitsSurviveRestarts: a group commits what it processed; the whole
// group restarts and resumes at the committed offsets; after a broker restart the
// committed offsets are all still there.
func TestGroupCommitsSurviveRestarts(t *testing.T) {
	ctx := context.Background()
	cfg := nodeConfig(t.TempDir())
	cfg.GroupInitialDelay = 0
	cfg.OffsetsTopicPartition = 5
	n := startNode(t, cfg)
	cl, adm := n.client(t, kgo.DefaultProduceTopic("c3"))
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "c3"); err != nil {
		t.Fatal(err)
	}
	produce := func(from, to int) {
		t.Helper()
		var rs []*kgo.Record
		for i := from; i < to; i++ {
			rs = append(rs, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	consume := func(addr string, want int) map[string]bool {
		t.Helper()
		c, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("resume"), kgo.ConsumeTopics("c3"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		got := map[string]bool{}
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		for len(got) < want {
			fs := c.PollFetches(pctx)
			if pctx.Err() != nil {
				t.Fatalf("read %d of %d", len(got), want)
			}
			for _, r := range fs.Records() {
				if got[string(r.Value)] {
					t.Fatalf("value %s read twice", r.Value)
				}
				got[string(r.Value)] = true
			}
		}
		if err := c.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatal(err)
		}
		return got
	}
	produce(0, 30)
	if got := consume(n.KafkaAddr(), 30); len(got) != 30 {
		t.Fatalf("first run read %d", len(got))
	}
	produce(30, 50)
	got := consume(n.KafkaAddr(), 20)
	for v := range got {
		var i int
		fmt.Sscan(v, &i)
		if i < 30 {
			t.Fatalf("restarted group re-read %s: it must resume at the committed offsets", v)
		}
	}
	before, err := adm.FetchOffsets(ctx, "resume")
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	n2 := startNode(t, cfg)
	_, adm2 := n2.client(t)
	var after kadm.OffsetResponses
	wait.For(t, "offsets after the broker restart", func() bool {
		after, err = adm2.FetchOffsets(ctx, "resume")
		return err == nil && after.Ok()
	})
	before.Each(func(o kadm.OffsetResponse) {
		a, ok := after.Lookup(o.Topic, o.Partition)
		if !ok || a.At != o.At {
			t.Fatalf("%s-%d: committed %d before the restart, %d after", o.Topic, o.Partition, o.At, a.At)
		}
	})
	var total int64
	after.Each(func(o kadm.OffsetResponse) { total += o.At })
	if total != 50 {
		t.Fatalf("committed offsets sum to %d, want 50", total)
	}
}

// TestCooperativeStickyKeepsPartitions: with the cooperative-sticky assignor, a
// member joining moves only the partitions it takes; the others never lose theirs.
func TestCooperativeStickyKeepsPartitions(t *testing.T) {
	n, adm := groupNode(t)
	if _, err := adm.CreateTopic(context.Background(), 6, 1, nil, "coop"); err != nil {
		t.Fatal(err)
	}
	coop := kgo.Balancers(kgo.CooperativeStickyBalancer())
	a := joinGroup(t, n.KafkaAddr(), "coop", "coop", coop)
	waitBalanced(t, "one member", []*member{a}, 6, 6)
	b := joinGroup(t, n.KafkaAddr(), "coop", "coop", coop)
	waitBalanced(t, "two members", []*member{a, b}, 6, 3, 3)
	// Cooperative: a gave up exactly the three partitions b took, nothing else.
	if got := a.revocations(); len(got) != 3 {
		t.Fatalf("member a had %v revoked, want exactly the 3 partitions that moved", got)
	}
	for _, p := range a.revocations() {
		if !slices.Contains(b.partitions(), p) {
			t.Fatalf("member a lost partition %d, which b did not take", p)
		}
	}
}

// TestStaticMemberRestartKeepsPartitions: a static member (group.instance.id) that
// restarts within its session timeout gets its partitions back with no rebalance:
// the other member keeps its assignment throughout. The member restarted is not
// the group leader: a restarted kgo leader told to skip the assignment (KIP-814)
// computes a plan of its own anyway and rejoins, forcing a rebalance, whenever
// that plan's bytes differ from the stored one, which they may by partition order
// alone.
func TestStaticMemberRestartKeepsPartitions(t *testing.T) {
	n, adm := groupNode(t)
	if _, err := adm.CreateTopic(context.Background(), 4, 1, nil, "static"); err != nil {
		t.Fatal(err)
	}
	leader := joinGroup(t, n.KafkaAddr(), "static", "static", kgo.InstanceID("a"))
	waitBalanced(t, "the leader alone", []*member{leader}, 4, 4)
	b := joinGroup(t, n.KafkaAddr(), "static", "static", kgo.InstanceID("b"))
	waitBalanced(t, "two static members", []*member{leader, b}, 4, 2, 2)
	leaderParts, bParts := leader.partitions(), b.partitions()
	revokedBefore := len(leader.revocations())
	describe := func() kadm.DescribedGroup {
		t.Helper()
		dg, err := adm.DescribeGroups(context.Background(), "static")
		if err != nil {
			t.Fatal(err)
		}
		return dg["static"]
	}
	b.leave() // a static member's Close sends no LeaveGroup
	b2 := joinGroup(t, n.KafkaAddr(), "static", "static", kgo.InstanceID("b"))
	waitBalanced(t, "static member back", []*member{leader, b2}, 4, 2, 2)
	if !slices.Equal(b2.partitions(), bParts) || !slices.Equal(leader.partitions(), leaderParts) {
		t.Fatalf("assignment changed across a static restart: b %v -> %v, leader %v -> %v", bParts, b2.partitions(), leaderParts, leader.partitions())
	}
	if r := leader.revocations(); len(r) != revokedBefore {
		t.Fatalf("the other member had %v revoked after the restart: a static restart must not rebalance", r[revokedBefore:])
	}
	if after := describe(); after.State != "Stable" {
		t.Fatalf("group state %s after the static restart, want Stable", after.State)
	}
}
