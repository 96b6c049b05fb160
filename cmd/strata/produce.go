package main

// strata produce: records from stdin lines.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/cli"
)

// maxLineBytes bounds one input line (one record).
const maxLineBytes = 16 << 20

// maxShownErrors bounds the per-record errors printed in table mode.
const maxShownErrors = 10

func produceCmd() *cobra.Command { return newProduceCmd(processEnv()) }

type produceFlags struct {
	key, keySeparator string
	headers           []string
	acks              string
	partition         int32
	compression       string
	verbose           bool
	progress          progressFlags
}

func newProduceCmd(env *clientEnv) *cobra.Command {
	g := &globalFlags{}
	f := &produceFlags{}
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Produce records read from stdin, one per line",
		Long: `Produce records read from stdin, one record per line (the newline is not part of
the record). Records with a key go to the partition the key hashes to (Kafka's
murmur2), others are spread in batches. The exit status is 1 if any record failed.`,
		Example: `  printf 'a\nb\n' | strata produce orders
  printf 'user1:clicked\nuser2:bought\n' | strata produce orders --key-separator : -H source=web
  strata produce orders --acks 1 --compression zstd < events.txt`,
		Args:              usageArgs(env, cobra.ExactArgs(1)),
		ValidArgsFunction: completeTopics(env, g),
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.key, "key", "k", "", "key of every record")
	fl.StringVar(&f.keySeparator, "key-separator", "", "split each line at the first SEP into key and value")
	fl.StringArrayVarP(&f.headers, "header", "H", nil, "header key=value on every record (repeatable)")
	fl.StringVar(&f.acks, "acks", "all", "acknowledgement: 0 (none), 1 (leader) or all (in-sync replicas)")
	fl.Int32Var(&f.partition, "partition", -1, "produce every record to this partition (-1: by key)")
	fl.StringVar(&f.compression, "compression", "none", "batch compression: none, gzip, snappy, lz4 or zstd")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "print the partition and offset of every record")
	f.progress.bind(cmd)
	completeValues(cmd, "acks", "all", "1", "0")
	completeValues(cmd, "compression", "none", "gzip", "snappy", "lz4", "zstd")
	return newLeafCmd(env, g, cmd, func(ctx context.Context, s *session, _ *cobra.Command, args []string) error {
		return produce(ctx, s, f, args[0])
	})
}

// producerOpts turns the flags into client options.
func (f *produceFlags) producerOpts(s *session) ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.AllowAutoTopicCreation(), kgo.RecordDeliveryTimeout(s.opts.Timeout)}
	switch f.acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		return nil, cli.Usagef("--acks: %q is not 0, 1 or all", f.acks)
	}
	var codec kgo.CompressionCodec
	switch f.compression {
	case "none":
		codec = kgo.NoCompression()
	case "gzip":
		codec = kgo.GzipCompression()
	case "snappy":
		codec = kgo.SnappyCompression()
	case "lz4":
		codec = kgo.Lz4Compression()
	case "zstd":
		codec = kgo.ZstdCompression()
	default:
		return nil, cli.Usagef("--compression: %q is not none, gzip, snappy, lz4 or zstd", f.compression)
	}
	opts = append(opts, kgo.ProducerBatchCompression(codec))
	switch {
	case f.partition >= 0:
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	case f.partition != -1:
		return nil, cli.Usagef("--partition must be a partition number or -1, got %d", f.partition)
	}
	if f.key != "" && f.keySeparator != "" {
		return nil, cli.Usagef("--key and --key-separator exclude each other")
	}
	return opts, nil
}

// producedJSON is one line of produce --output json.
type producedJSON struct {
	Line      int        `json:"line"`
	Topic     string     `json:"topic"`
	Partition int32      `json:"partition"` // -1 if unknown
	Offset    int64      `json:"offset"`    // -1 if unknown (failed, or --acks 0)
	Timestamp *time.Time `json:"timestamp,omitempty"`
	Error     string     `json:"error,omitempty"`
}

// produceRun is the state of one produce command shared with the promises, which run
// on the client's goroutines.
type produceRun struct {
	s       *session
	topic   string
	verbose bool
	noAcks  bool
	prog    cli.Progress

	mu     sync.Mutex
	ok     int
	failed int
	shown  int // errors printed so far
}

func produce(ctx context.Context, s *session, f *produceFlags, topic string) error {
	opts, err := f.producerOpts(s)
	if err != nil {
		return err
	}
	var headers []kgo.RecordHeader
	for _, h := range f.headers {
		k, v, err := cli.ParseKeyValue("--header", h)
		if err != nil {
			return err
		}
		headers = append(headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	progress, err := f.progress.setup(s, f.verbose)
	if err != nil {
		return err
	}
	cl, err := cli.Connect(ctx, s.opts, opts...)
	if err != nil {
		return err
	}
	closeClient := sync.OnceFunc(cl.Close)
	defer closeClient()
	// Ask for the brokers before reading stdin: a listener that is not a Kafka broker
	// this client can use (TLS or SASL missing) fails here at once, with the client's
	// diagnosis, instead of every record after --timeout.
	checkCtx, cancel := s.withTimeout(ctx)
	_, err = kadm.NewClient(cl).BrokerMetadata(checkCtx)
	cancel()
	if err != nil {
		return err
	}

	// With a file on stdin the amount of work is known: count bytes, show an ETA.
	unit, total := cli.UnitRecords, int64(0)
	if file, ok := s.env.stdin.(*os.File); ok {
		if fi, err := file.Stat(); err == nil && fi.Mode().IsRegular() {
			unit, total = cli.UnitBytes, fi.Size()
		}
	}
	pr := &produceRun{s: s, topic: topic, verbose: f.verbose, noAcks: f.acks == "0"}
	pr.prog = cli.NewProgress(progress, "produce "+topic, unit, total)

	// An interrupt stops the reading; what was read is still delivered (within
	// --timeout), so records are produced under a context that is not cancelled.
	sendCtx := context.WithoutCancel(ctx)
	in := readLines(s.env.stdin, ctx.Done())
	var pending sync.WaitGroup // records whose promise has not run yet
	line, eof := 0, false
	for !eof {
		var text []byte
		select {
		case <-ctx.Done():
		case text, eof = <-in.lines:
			eof = !eof
		}
		if eof || ctx.Err() != nil {
			break
		}
		line++
		done := int64(1)
		if unit == cli.UnitBytes {
			done = int64(len(text)) + 1
		}
		r := &kgo.Record{Topic: topic, Partition: f.partition, Headers: headers}
		switch {
		case f.keySeparator != "":
			k, v, ok := bytes.Cut(text, []byte(f.keySeparator))
			if !ok {
				pr.finished(line, r, fmt.Errorf("no key separator %q in the line", f.keySeparator), done)
				continue
			}
			r.Key, r.Value = k, v
		case f.key != "":
			r.Key, r.Value = []byte(f.key), text
		default:
			r.Value = text
		}
		n := line
		pending.Add(1)
		cl.Produce(sendCtx, r, func(r *kgo.Record, err error) {
			pr.finished(n, r, err, done)
			pending.Done()
		})
	}
	flushCtx, cancel := context.WithTimeout(sendCtx, s.opts.Timeout)
	defer cancel()
	flushErr := cl.Flush(flushCtx)
	if flushErr != nil {
		// The records still buffered or in flight fail only once the client
		// closes: close it now, so that the summary counts them.
		closeClient()
	}
	pending.Wait()
	pr.prog.Finish()
	var scanErr error
	if eof {
		scanErr = in.err
	}
	if errors.Is(scanErr, bufio.ErrTooLong) {
		scanErr = fmt.Errorf("line %d is longer than %d bytes: stopped reading", line+1, maxLineBytes)
	}

	pr.mu.Lock()
	defer pr.mu.Unlock()
	if !s.json() {
		fmt.Fprintf(s.env.stderr, "produced %d records to %s", pr.ok, topic)
		if pr.failed > 0 {
			fmt.Fprintf(s.env.stderr, ", %d failed", pr.failed)
		}
		fmt.Fprintln(s.env.stderr)
	}
	var errs []error
	if scanErr != nil {
		errs = append(errs, fmt.Errorf("reading stdin: %w", scanErr))
	}
	if pr.failed > 0 {
		errs = append(errs, fmt.Errorf("%d of %d records failed", pr.failed, pr.ok+pr.failed))
	}
	if flushErr != nil {
		errs = append(errs, fmt.Errorf("delivering the records: %w", flushErr))
	}
	return errors.Join(errs...)
}

// finished accounts for one record (line n): delivered, or failed with err.
func (pr *produceRun) finished(n int, r *kgo.Record, err error, done int64) {
	pr.prog.Add(done)
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if err != nil {
		pr.failed++
	} else {
		pr.ok++
	}
	s := pr.s
	if s.json() {
		out := producedJSON{Line: n, Topic: pr.topic, Partition: -1, Offset: -1}
		if err != nil {
			out.Error = err.Error()
		} else {
			out.Partition = r.Partition
			if !pr.noAcks {
				out.Offset = r.Offset
			}
			ts := r.Timestamp.UTC()
			out.Timestamp = &ts
		}
		b, _ := json.Marshal(out)
		s.env.stdout.Write(append(b, '\n'))
		return
	}
	switch {
	case err != nil && pr.shown < maxShownErrors:
		pr.shown++
		fmt.Fprintf(s.env.stderr, "line %d: %v\n", n, err)
	case err == nil && pr.verbose && pr.noAcks:
		fmt.Fprintf(s.env.stdout, "line %d: partition %d (acks=0: offset unknown)\n", n, r.Partition)
	case err == nil && pr.verbose:
		fmt.Fprintf(s.env.stdout, "line %d: partition %d offset %d\n", n, r.Partition, r.Offset)
	}
}

// inputLines are the lines of the input, read on their own goroutine so that an
// interrupt is noticed even while a read from a terminal blocks.
type inputLines struct {
	lines <-chan []byte // closed at the end of the input or on stop
	err   error         // the read error; read it only after lines is closed
}

func readLines(r io.Reader, stop <-chan struct{}) *inputLines {
	lines := make(chan []byte, 256)
	in := &inputLines{lines: lines}
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), maxLineBytes)
		for sc.Scan() {
			select {
			case lines <- bytes.Clone(sc.Bytes()):
			case <-stop:
				return
			}
		}
		in.err = sc.Err()
	}()
	return in
}
