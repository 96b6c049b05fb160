// Command kcat drives the kcat tool (librdkafka inside) as an interop client and prints
// the same JSON summary as the other interop clients (see interop/report):
//
//	go run ./interop/kcat [-mode both|produce|consume|group] [-count N] [-keys K]
//	    [-timeout-ms 60000] [-name kcat] [-group G] [-config key=value ...] BOOTSTRAP TOPIC
//
// -config (repeatable) passes a librdkafka property to every kcat process (-X), e.g.
// security.protocol, sasl.mechanism, sasl.username, sasl.password, ssl.ca.location.
// Group mode does not take it: its watcher (an admin client) connects without them.
//
// Producing: kcat reports each delivery as "Message delivered to partition P (offset O)"
// on stderr (at -vv) but does not say which message it was. So the driver starts one
// `kcat -P` per key: every record of one process lands on one partition, in order, and
// the n-th delivery report belongs to the n-th record written to that process. Headers
// are per process in kcat (-H), so they name the key's group rather than each record.
// kcat runs with acks=all and partitioner=murmur2_random, librdkafka's Java-compatible
// partitioner (its default, consistent_random, places keys differently).
//
// Consuming: one `kcat -C -o beginning -e -J` reads every partition from the earliest
// offset to the end, with kcat's simple (group-less) consumer.
//
// Group mode: `kcat -G GROUP TOPIC` reads as a member of a consumer group with
// librdkafka's own committing (auto commit of what was handed to kcat, and a final
// commit on close). kcat never ends by itself there, so the driver watches it: kcat's
// stderr names each assignment and each partition end it reaches, and an admin client
// (franz-go) reads the topic's end offsets and the group's committed offsets. Once the
// topic holds at least -count records, kcat reached the end of every partition it owns,
// and the group committed the end of every partition, the driver stops kcat with SIGTERM
// (it then closes its consumer: final commit, LeaveGroup). See group.go.
//
// Exits 1 with a message on stderr on any error, 2 on bad usage.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-stream/strata/interop/report"
)

// parallel bounds the kcat producer processes running at once.
const parallel = 4

type options struct {
	bootstrap, topic, name string
	produce, consume       bool
	group                  string // group mode when set
	count, keys            int
	config                 []string // key=value, passed to kcat as -X
}

// configFlag collects repeated -config key=value flags.
type configFlag []string

func (c *configFlag) String() string { return strings.Join(*c, ",") }

func (c *configFlag) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("%q is not key=value", v)
	}
	*c = append(*c, v)
	return nil
}

// xArgs returns o.config as kcat -X arguments.
func (o options) xArgs() []string {
	var args []string
	for _, kv := range o.config {
		args = append(args, "-X", kv)
	}
	return args
}

func main() {
	os.Exit(run())
}

func run() int {
	var o options
	mode := flag.String("mode", "both", "both, produce, consume or group")
	flag.IntVar(&o.count, "count", 200, "records to produce; in group mode, records the topic must hold before the member may stop")
	flag.StringVar(&o.group, "group", "", "consumer group (group mode)")
	flag.IntVar(&o.keys, "keys", 20, "distinct keys to spread them over")
	timeoutMS := flag.Int("timeout-ms", 60000, "give up after this many milliseconds")
	flag.StringVar(&o.name, "name", "kcat", "label put into values and headers")
	flag.Var((*configFlag)(&o.config), "config", "librdkafka property key=value for kcat's -X (repeatable; not in group mode)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: kcat [flags] BOOTSTRAP TOPIC")
		flag.PrintDefaults()
	}
	flag.Parse()
	switch *mode {
	case "both":
		o.produce, o.consume = true, true
	case "produce":
		o.produce = true
	case "consume":
		o.consume = true
	case "group":
		if o.group == "" {
			fmt.Fprintln(os.Stderr, "kcat driver: -mode group needs -group")
			return 2
		}
		if len(o.config) > 0 {
			fmt.Fprintln(os.Stderr, "kcat driver: -mode group does not take -config")
			return 2
		}
	default:
		fmt.Fprintf(os.Stderr, "kcat driver: unknown -mode %q\n", *mode)
		return 2
	}
	if flag.NArg() != 2 || o.count <= 0 || o.keys <= 0 || *timeoutMS <= 0 {
		flag.Usage()
		return 2
	}
	o.bootstrap, o.topic = flag.Arg(0), flag.Arg(1)

	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*timeoutMS)*time.Millisecond)
	defer cancel()
	s, err := drive(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kcat driver:", err)
		return 1
	}
	out, err := json.Marshal(s)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kcat driver:", err)
		return 1
	}
	fmt.Printf("%s\n", out)
	return 0
}

func drive(ctx context.Context, o options) (*report.Summary, error) {
	version, err := kcatVersion(ctx)
	if err != nil {
		return nil, err
	}
	s := &report.Summary{Client: "kcat", Library: version, Topic: o.topic, Produced: []report.Produced{}}
	if !o.produce && !o.consume {
		start := time.Now()
		g, err := consumeGroup(ctx, o)
		if err != nil {
			return nil, err
		}
		s.Consumed, s.Group, s.Assignments = g.consumed, o.group, g.assignments
		s.ConsumeMS = time.Since(start).Milliseconds()
		return s, nil
	}
	if o.produce {
		start := time.Now()
		if s.Produced, err = produce(ctx, o); err != nil {
			return nil, err
		}
		s.ProduceMS = time.Since(start).Milliseconds()
	}
	if o.consume {
		start := time.Now()
		if s.Consumed, err = consume(ctx, o, s.Produced); err != nil {
			return nil, err
		}
		s.ConsumeMS = time.Since(start).Milliseconds()
	}
	return s, nil
}

// kcatVersion returns e.g. "kcat 1.7.1 (librdkafka 2.0.2)".
func kcatVersion(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "kcat", "-V").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("kcat -V: %w: %s", err, out)
	}
	m := regexp.MustCompile(`Version (\S+) .*librdkafka (\S+)`).FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("kcat -V: no version in %q", out)
	}
	return fmt.Sprintf("kcat %s (librdkafka %s)", m[1], m[2]), nil
}

// keyGroup is the records of one key, in send order: one kcat producer process.
type keyGroup struct {
	key     string
	seqs    []int // index of each record in the run's send order
	headers []report.Header
}

func produce(ctx context.Context, o options) ([]report.Produced, error) {
	groups := make([]keyGroup, o.keys)
	for k := range groups {
		g := &groups[k]
		g.key = fmt.Sprintf("key-%02d", k)
		g.headers = []report.Header{
			{Key: "client", Value: []byte(o.name)},
			{Key: "group", Value: []byte(g.key)},
			{Key: "dup", Value: []byte("first")},
			{Key: "dup", Value: []byte("second")},
		}
		if k%10 == 0 {
			g.headers = append(g.headers, report.Header{Key: "empty", Value: []byte{}}, report.Header{Key: "nil"})
		}
	}
	for i := range o.count {
		g := &groups[i%o.keys]
		g.seqs = append(g.seqs, i)
	}

	produced := make([]report.Produced, o.count)
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		slots    = make(chan struct{}, parallel)
	)
	for _, g := range groups {
		if len(g.seqs) == 0 {
			continue
		}
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			recs, err := produceGroup(ctx, o, g)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				firstErr = firstOf(firstErr, err)
				return
			}
			for j, seq := range g.seqs {
				produced[seq] = recs[j]
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return produced, nil
}

// firstOf keeps the first error.
func firstOf(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

var deliveredRE = regexp.MustCompile(`Message delivered to partition (-?\d+) \(offset (-?\d+)\)`)

// produceGroup runs one kcat producer for the records of one key.
func produceGroup(ctx context.Context, o options, g keyGroup) ([]report.Produced, error) {
	args := []string{"-P", "-b", o.bootstrap, "-t", o.topic, "-K", "\t",
		"-X", "acks=all", "-X", "partitioner=murmur2_random", "-vv"}
	args = append(args, o.xArgs()...)
	for _, h := range g.headers {
		if h.Value == nil {
			args = append(args, "-H", h.Key) // kcat: a header without "=" has a null value
		} else {
			args = append(args, "-H", h.Key+"="+string(h.Value))
		}
	}
	var in bytes.Buffer
	recs := make([]report.Produced, len(g.seqs))
	for j, seq := range g.seqs {
		value := fmt.Sprintf("%s-%04d", o.name, seq)
		fmt.Fprintf(&in, "%s\t%s\n", g.key, value)
		recs[j] = report.Produced{Key: []byte(g.key), Value: []byte(value), Headers: g.headers}
	}

	cmd := exec.CommandContext(ctx, "kcat", args...)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kcat producer for %s: %w: %s", g.key, err, tail(stderr.String()))
	}
	reports := deliveredRE.FindAllStringSubmatch(stderr.String(), -1)
	if len(reports) != len(recs) {
		return nil, fmt.Errorf("kcat producer for %s: %d delivery reports for %d records: %s",
			g.key, len(reports), len(recs), tail(stderr.String()))
	}
	for j, m := range reports {
		p, err1 := strconv.ParseInt(m[1], 10, 32)
		off, err2 := strconv.ParseInt(m[2], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("kcat producer for %s: delivery report %q: %w", g.key, m[0], err)
		}
		recs[j].Partition, recs[j].Offset = int32(p), off
	}
	return recs, nil
}

// kcatRecord is one line of `kcat -C -J`; headers alternate name and value.
type kcatRecord struct {
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Key       *string   `json:"key"`
	Payload   *string   `json:"payload"`
	Headers   []*string `json:"headers"`
}

func consume(ctx context.Context, o options, produced []report.Produced) ([]report.Consumed, error) {
	cmd := exec.CommandContext(ctx, "kcat", append([]string{"-C", "-b", o.bootstrap, "-t", o.topic,
		"-o", "beginning", "-e", "-J", "-q"}, o.xArgs()...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kcat consumer: %w: %s", err, tail(stderr.String()))
	}
	consumed, err := parseRecords(&stdout)
	if err != nil {
		return nil, err
	}

	// -e stops at the end of every partition, which is past everything acknowledged.
	seen := make(map[[2]int64]bool, len(consumed))
	for _, c := range consumed {
		seen[[2]int64{int64(c.Partition), c.Offset}] = true
	}
	for _, p := range produced {
		if !seen[[2]int64{int64(p.Partition), p.Offset}] {
			return nil, fmt.Errorf("kcat consumer stopped before acknowledged record %d/%d", p.Partition, p.Offset)
		}
	}
	return consumed, nil
}

// parseRecords decodes the lines of `kcat -J` output.
func parseRecords(out io.Reader) ([]report.Consumed, error) {
	consumed := []report.Consumed{}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	for sc.Scan() {
		var r kcatRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("kcat consumer: line %q: %w", sc.Text(), err)
		}
		if len(r.Headers)%2 != 0 {
			return nil, fmt.Errorf("kcat consumer: odd header list in %q", sc.Text())
		}
		c := report.Consumed{Partition: r.Partition, Offset: r.Offset, Key: bytesOf(r.Key), Value: bytesOf(r.Payload), Headers: []report.Header{}}
		for i := 0; i < len(r.Headers); i += 2 {
			if r.Headers[i] == nil {
				return nil, fmt.Errorf("kcat consumer: null header name in %q", sc.Text())
			}
			c.Headers = append(c.Headers, report.Header{Key: *r.Headers[i], Value: bytesOf(r.Headers[i+1])})
		}
		consumed = append(consumed, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("kcat consumer: %w", err)
	}
	return consumed, nil
}

func bytesOf(s *string) []byte {
	if s == nil {
		return nil
	}
	return []byte(*s)
}

// tail keeps the end of a process's stderr for an error message.
func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 2000 {
		return "..." + s[len(s)-2000:]
	}
	return s
}
