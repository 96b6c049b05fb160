package interop

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/testcluster"
)

// TestKafkaStreamsFailover runs the word count (interop/streams) with
// exactly_once_v2 on a 3-node cluster while a broker is killed and restarted:
//
//  1. Start the cluster; create the input and output topics (3 partitions,
//     replication factor 3, min.insync.replicas=2). Streams makes its internal
//     topics with replication factor 3 too.
//  2. Write 200 lines, start the application and wait until their counts are out.
//  3. A writer keeps appending lines (idempotent, acks=all) while the application
//     runs. Kill -9 the node that coordinates the application's transactional id
//     and leads a partition of the input or output topic (pickStreamsVictim), with
//     the application's transactions in flight; keep writing through the failover;
//     restart the node.
//  4. Stop the writer. A read_committed reader of the output topic must see, for
//     every word, the counts 1, 2, ..., n exactly once each and in order, n being
//     the word's count in the acknowledged lines: nothing counted twice (a redone
//     transaction), nothing skipped, no aborted count read.
//  5. The application is still running and stops cleanly on SIGTERM.
func TestKafkaStreamsFailover(t *testing.T) {
	if os.Getenv(envTarget) == "kfake" {
		t.Skip("runs on a Strata cluster; not with STRATA_INTEROP_TARGET=kfake")
	}
	if _, err := os.Stat("streams/target/classes/io/strata/interop/streams/WordCount.class"); err != nil {
		requireStreams(t, "the Streams application is not built (streams/target)")
	}
	t.Setenv(testcluster.BinaryEnv, strataBinary(t))
	c := testcluster.Start(t, 3)
	adm := newAdmin(t, c.Bootstrap()...)
	const app = "wordcount-failover"
	in, out := app+"-in", app+"-out"
	createReplicatedTopic(t, c, adm, in)
	createReplicatedTopic(t, c, adm, out)
	bootstrap := strings.Join(c.Bootstrap(), ",")
	start := time.Now()
	step := func(format string, args ...any) {
		t.Logf("%6.1fs %s", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}

	lw := startLineWriter(t, c.Bootstrap(), in)
	lw.write(t, 200)
	wc := startWordCount(t, bootstrap, app, in, out, "exactly_once_v2",
		"replication.factor=3", "topic.min.insync.replicas=2")
	rd := newCountReader(t, c.Bootstrap(), out)
	rd.readUntil(t, wc, lw.want(), 2*time.Minute, "the counts of the first 200 lines")
	step("the first 200 lines counted")

	lw.run()
	lw.waitLines(t, 400)
	victim, led := pickStreamsVictim(t, c, adm, app, in, out)
	step("killing node %d (%s) with %d lines written", victim.ID, led, lw.lines())
	victim.Kill()
	for _, topic := range []string{in, out} {
		for p := range int32(partitions) {
			c.WaitPartition(topic, p, time.Minute, "a live leader", func(st testcluster.PartitionState) error {
				if st.Leader < 1 || st.Leader == victim.ID {
					return errors.New("no new leader yet")
				}
				return nil
			})
		}
	}
	killedAt := lw.lines()
	step("new leaders of every input and output partition; %d lines written", killedAt)
	lw.waitLines(t, killedAt+300)
	victim.Restart()
	step("node %d restarted; %d lines written", victim.ID, lw.lines())
	lw.waitLines(t, lw.lines()+200)
	lw.stop(t)
	want := lw.want()
	step("writer stopped after %d lines", lw.lines())

	rd.readUntil(t, wc, want, 2*time.Minute, "the final counts")
	rd.drainQuiet(t)
	step("final counts read")
	for w, n := range want {
		seq := rd.seq[w]
		ok := len(seq) == int(n)
		for i := 0; ok && i < len(seq); i++ {
			ok = seq[i] == int64(i+1)
		}
		if !ok {
			t.Errorf("word %s: read_committed counts %v, want 1..%d each once", w, abbreviate(seq), n)
		}
	}
	if len(rd.seq) != len(want) {
		t.Errorf("counted words %d, want %d", len(rd.seq), len(want))
	}
	if wc.exited() {
		t.Fatalf("the Streams application exited during the failover\n%s", wc.output())
	}
	if err := wc.stop(); err != nil {
		t.Fatal(err)
	}
}

// pickStreamsVictim returns the node coordinating the application's transactional
// id (Streams' exactly_once_v2 producer) when it also leads a partition of in or
// out, else the leader of in's partition 0; and what it leads, for the log.
func pickStreamsVictim(t *testing.T, c *testcluster.Cluster, adm *kadm.Client, app, in, out string) (*testcluster.Node, string) {
	t.Helper()
	var coordinator int32 = -1
	testcluster.Eventually(t, 30*time.Second, "the application's transactional id", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		listed, err := adm.ListTransactions(ctx, nil, nil)
		if err != nil {
			return err
		}
		for _, l := range listed.Sorted() {
			if strings.HasPrefix(l.TxnID, app+"-") {
				coordinator = l.Coordinator
				return nil
			}
		}
		return fmt.Errorf("no transactional id of %s among %d", app, len(listed))
	})
	var led []string
	for _, topic := range []string{in, out} {
		for p := range int32(partitions) {
			if c.Leader(topic, p).ID == coordinator {
				led = append(led, fmt.Sprintf("%s-%d", topic, p))
			}
		}
	}
	if len(led) > 0 {
		return c.Node(coordinator), fmt.Sprintf("transaction coordinator, leader of %s", strings.Join(led, " "))
	}
	return c.Leader(in, 0), fmt.Sprintf("leader of %s-0; node %d coordinates the transactions", in, coordinator)
}

// lineWriter appends numbered lines (lineWords) to the input topic, ten every
// 100 ms once running, and counts the words of the acknowledged ones.
type lineWriter struct {
	cl    *kgo.Client
	topic string
	loop  *repeat // set by run

	mu    sync.Mutex
	n     int // lines acknowledged
	words map[string]int64
}

func startLineWriter(t *testing.T, bootstrap []string, topic string) *lineWriter {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	w := &lineWriter{cl: cl, topic: topic, words: map[string]int64{}}
	t.Cleanup(func() {
		if w.loop != nil {
			_ = w.loop.stop()
		}
		cl.Close()
	})
	return w
}

// write appends n lines and waits for their acknowledgements.
func (w *lineWriter) write(t *testing.T, n int) {
	t.Helper()
	if err := w.writeLines(n); err != nil {
		t.Fatal(err)
	}
}

func (w *lineWriter) writeLines(n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	from := w.lines()
	var rs []*kgo.Record
	for i := from; i < from+n; i++ {
		rs = append(rs, &kgo.Record{Key: fmt.Append(nil, i), Value: []byte(strings.Join(lineWords(i), " "))})
	}
	if err := w.cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		return fmt.Errorf("writing lines %d..%d: %w", from, from+n-1, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := from; i < from+n; i++ {
		for _, word := range lineWords(i) {
			w.words[word]++
		}
	}
	w.n += n
	return nil
}

// run keeps writing in the background until stop.
func (w *lineWriter) run() {
	w.loop = startRepeat(100*time.Millisecond, func() error { return w.writeLines(10) })
}

// stop ends run and fails the test if a write failed.
func (w *lineWriter) stop(t *testing.T) {
	t.Helper()
	if err := w.loop.stop(); err != nil {
		t.Fatal(err)
	}
}

func (w *lineWriter) lines() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// want is every word's count in the acknowledged lines.
func (w *lineWriter) want() map[string]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int64, len(w.words))
	for k, v := range w.words {
		out[k] = v
	}
	return out
}

// waitLines waits until n lines are acknowledged.
func (w *lineWriter) waitLines(t *testing.T, n int) {
	t.Helper()
	testcluster.Eventually(t, 2*time.Minute, fmt.Sprintf("%d lines written", n), func() error {
		if ended, err := w.loop.ended(); ended {
			return fmt.Errorf("the writer stopped: %v", err)
		}
		if got := w.lines(); got < n {
			return fmt.Errorf("%d lines written", got)
		}
		return nil
	})
}

// countReader reads the word count's output with read_committed and keeps every
// word's successive counts.
type countReader struct {
	cl  *kgo.Client
	seq map[string][]int64
}

func newCountReader(t *testing.T, bootstrap []string, topic string) *countReader {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &countReader{cl: cl, seq: map[string][]int64{}}
}

// poll reads for up to wait and reports how many records came.
func (r *countReader) poll(t *testing.T, wait time.Duration) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	fs := r.cl.PollFetches(ctx)
	cancel()
	fs.EachError(func(topic string, p int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Logf("reading %s/%d: %v", topic, p, err)
		}
	})
	fs.EachRecord(func(rec *kgo.Record) {
		if len(rec.Value) != 8 {
			t.Fatalf("count of %q is %d bytes, want a long", rec.Key, len(rec.Value))
		}
		r.seq[string(rec.Key)] = append(r.seq[string(rec.Key)], int64(binary.BigEndian.Uint64(rec.Value)))
	})
	return fs.NumRecords()
}

// readUntil reads until every word's last count is want's, failing the test at
// the deadline or if the application exits.
func (r *countReader) readUntil(t *testing.T, wc *javaApp, want map[string]int64, timeout time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		last := map[string]int64{}
		for w, seq := range r.seq {
			last[w] = seq[len(seq)-1]
		}
		if mapsEqual(last, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: last counts %v, want %v\nStreams output:\n%s", what, last, want, wc.output())
		}
		if wc.exited() {
			t.Fatalf("%s: the Streams application exited\n%s", what, wc.output())
		}
		r.poll(t, time.Second)
	}
}

// drainQuiet reads until a poll of two seconds brings nothing: a count written
// twice after the last one expected would show here.
func (r *countReader) drainQuiet(t *testing.T) {
	t.Helper()
	for r.poll(t, 2*time.Second) > 0 {
	}
}

// abbreviate shows a long count sequence by its anomalies' surroundings.
func abbreviate(seq []int64) string {
	if len(seq) <= 20 {
		return fmt.Sprint(seq)
	}
	for i, v := range seq {
		if v != int64(i+1) {
			lo, hi := max(0, i-3), min(len(seq), i+4)
			return fmt.Sprintf("%d counts, first anomaly at index %d: ...%v...", len(seq), i, slices.Clone(seq[lo:hi]))
		}
	}
	return fmt.Sprintf("%d counts 1..%d", len(seq), len(seq))
}
