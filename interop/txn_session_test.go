package interop

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/testcluster"
)

// TestGroupTransactSessionRebalance runs franz-go's GroupTransactSession
// read-process-write loop (consume in a group with read_committed, produce the copy
// and commit the group's offsets in one transaction) across two rebalances, while
// the input keeps growing:
//
//  1. Create an input and an output topic of 3 partitions; a writer appends keyed
//     records to the input (values in-NNNNN) until told to stop.
//  2. Member a joins alone and copies records, each poll in one transaction.
//  3. Member b joins mid-run (a rebalance moves partitions from a to b, with a's
//     transactions in flight); both must commit copies after the join.
//  4. Member a leaves (a second rebalance hands b every partition); b must commit
//     copies after a is gone.
//  5. The writer stops; b catches up until the group's committed offsets are the
//     input's end offsets.
//  6. A read_committed reader drains the output: every input record is there exactly
//     once (no loss, no duplicate from a transaction redone after a rebalance, no
//     aborted copy), and each key's copies are in input order.
func TestGroupTransactSessionRebalance(t *testing.T) {
	tgt := startTarget(t)
	const in, out, group = "interop-etl-in", "interop-etl-out", "interop-etl"
	createTopics(t, tgt.bootstrap, partitions, in, out)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	start := time.Now()
	step := func(what string, ms ...*etlMember) {
		var counts []string
		for _, m := range ms {
			counts = append(counts, fmt.Sprintf("member %s committed %d copies (%d transactions aborted)", m.name, m.count(), m.aborts()))
		}
		t.Logf("%6.1fs %s: %s", time.Since(start).Seconds(), what, strings.Join(counts, ", "))
	}
	w := startEtlWriter(t, tgt.bootstrap, in)
	a := startEtlMember(t, tgt.bootstrap, "a", group, in, out)
	testcluster.Eventually(t, time.Minute, "member a to commit 100 copies alone", func() error {
		return a.atLeast(100)
	})
	step("a alone", a)
	b := startEtlMember(t, tgt.bootstrap, "b", group, in, out)
	testcluster.Eventually(t, time.Minute, "member b to commit copies after joining, and member a after b joined", func() error {
		if err := b.atLeast(100); err != nil {
			return err
		}
		if _, aLast := a.commits(); !aLast.After(b.first()) {
			return errors.New("member a has committed nothing since b's first commit")
		}
		return nil
	})
	step("b joined", a, b)
	bBefore := b.count()
	a.leave()
	testcluster.Eventually(t, time.Minute, "member b to commit 100 copies after a left", func() error {
		return b.atLeast(bBefore + 100)
	})
	step("a left", a, b)
	produced := w.stop(t)
	adm := newAdmin(t, tgt.bootstrap)
	waitCommittedAtEnd(t, adm, group, in, time.Minute)
	b.leave()
	step("caught up", a, b)

	// Drain the output: read until a poll of 2 s brings nothing new.
	cl, err := kgo.NewClient(kgo.SeedBrokers(tgt.bootstrap), kgo.ConsumeTopics(out),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var copies []*kgo.Record
	for quiet := false; !quiet; {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			t.Fatal("draining the output took too long")
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("reading %s/%d: %v", topic, p, err)
			}
		})
		quiet = fs.NumRecords() == 0
		copies = append(copies, fs.Records()...)
	}

	seen := map[string]int{}
	lastByKey := map[string]int{}
	for _, r := range copies {
		v := string(r.Value)
		seen[v]++
		if seen[v] == 2 {
			t.Errorf("duplicate: %s copied twice", v)
		}
		n, err := strconv.Atoi(strings.TrimPrefix(v, "in-"))
		if err != nil {
			t.Fatalf("output record %q is no copy of an input", v)
		}
		if k := string(r.Key); n <= lastByKey[k] && lastByKey[k] != 0 {
			t.Errorf("key-order: %s copied after in-%05d of the same key %s", v, lastByKey[k], k)
		} else {
			lastByKey[k] = n
		}
	}
	lost := 0
	for _, v := range produced {
		if seen[v] == 0 {
			if lost++; lost <= 5 {
				t.Errorf("lost: input %s never copied", v)
			}
		}
		delete(seen, v)
	}
	if lost > 5 {
		t.Errorf("... %d inputs lost in all", lost)
	}
	for v := range seen {
		t.Errorf("phantom: output %s is no acknowledged input", v)
	}
	t.Logf("%6.1fs %d inputs, %d copies read back with read_committed", time.Since(start).Seconds(), len(produced), len(copies))
}

// etlWriter appends keyed records to the input topic, ten at a time, until stopped.
type etlWriter struct {
	stopc chan struct{}
	done  chan struct{}
	err   error
	acked []string // values, as acknowledged
}

func startEtlWriter(t *testing.T, bootstrap, topic string) *etlWriter {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	w := &etlWriter{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer cl.Close()
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		for n := 1; ; {
			select {
			case <-w.stopc:
				return
			case <-tick.C:
			}
			var rs []*kgo.Record
			for range 10 {
				rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "key-%02d", n%keys), Value: fmt.Appendf(nil, "in-%05d", n)})
				n++
			}
			if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				w.err = err
				return
			}
			for _, r := range rs {
				w.acked = append(w.acked, string(r.Value))
			}
		}
	}()
	t.Cleanup(func() { w.stop(t) })
	return w
}

// stop stops the writer and returns the values of every acknowledged record.
func (w *etlWriter) stop(t *testing.T) []string {
	t.Helper()
	select {
	case <-w.stopc:
	default:
		close(w.stopc)
	}
	<-w.done
	if w.err != nil {
		t.Fatalf("writing the input: %v", w.err)
	}
	return w.acked
}

// etlMember is one GroupTransactSession copying the input topic to the output topic.
type etlMember struct {
	name   string
	sess   *kgo.GroupTransactSession
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	mu          sync.Mutex
	failedEnds  int       // transactions that ended aborted or in error
	copied      int       // records in this member's committed transactions
	firstCommit time.Time // when its first transaction committed
	lastCommit  time.Time // and its last
}

func startEtlMember(t *testing.T, bootstrap, name, group, in, out string) *etlMember {
	t.Helper()
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(bootstrap),
		kgo.ClientID("strata-interop-etl-"+name),
		kgo.TransactionalID("strata-interop-etl-"+name),
		kgo.TransactionTimeout(20*time.Second),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.DefaultProduceTopic(out),
	)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &etlMember{name: name, sess: sess, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			// leave cancels ctx: the loop stops between transactions, never
			// leaving one open.
			fs := sess.PollRecords(ctx, 25)
			if ctx.Err() != nil || fs.IsClientClosed() {
				return
			}
			fs.EachError(func(topic string, p int32, err error) {
				t.Logf("member %s: fetching %s/%d: %v", name, topic, p, err)
			})
			if err := sess.Begin(); err != nil {
				t.Errorf("member %s: Begin: %v", name, err)
				return
			}
			ectx, ecancel := context.WithTimeout(context.Background(), 30*time.Second)
			fs.EachRecord(func(r *kgo.Record) {
				sess.Produce(ectx, &kgo.Record{Key: r.Key, Value: r.Value}, nil)
			})
			committed, err := sess.End(ectx, kgo.TryCommit)
			ecancel()
			switch {
			case err != nil || !committed:
				// The session aborted (a rebalance took partitions mid-transaction,
				// or the commit failed): the records are read again by their owner.
				m.mu.Lock()
				m.failedEnds++
				m.mu.Unlock()
				if err != nil {
					t.Logf("member %s: End: %v", name, err)
				}
			default:
				m.mu.Lock()
				m.copied += fs.NumRecords()
				if m.lastCommit = time.Now(); m.firstCommit.IsZero() {
					m.firstCommit = m.lastCommit
				}
				m.mu.Unlock()
			}
		}
	}()
	t.Cleanup(m.leave)
	return m
}

func (m *etlMember) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.copied
}

// commits returns when the member's first and last transactions committed.
func (m *etlMember) commits() (first, last time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.firstCommit, m.lastCommit
}

// first returns when the member's first transaction committed, or the far future.
func (m *etlMember) first() time.Time {
	if f, _ := m.commits(); !f.IsZero() {
		return f
	}
	return time.Now().Add(time.Hour)
}

func (m *etlMember) aborts() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failedEnds
}

func (m *etlMember) atLeast(n int) error {
	if c := m.count(); c < n {
		return fmt.Errorf("member %s has committed %d copies", m.name, c)
	}
	return nil
}

// leave stops the loop and closes the session, which leaves the group.
func (m *etlMember) leave() {
	m.once.Do(func() {
		m.cancel()
		<-m.done
		m.sess.Close()
	})
}
