package bench

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var (
	// ErrInvalidConfig wraps every Validate complaint: the run was never started.
	ErrInvalidConfig = errors.New("invalid benchmark configuration")
	// ErrRecordsFailed: some records were not delivered (or, in E2E, never arrived).
	// The Result is still returned and says how many.
	ErrRecordsFailed = errors.New("records failed")
	// ErrNoRecords: a consume run found nothing to read.
	ErrNoRecords = errors.New("no records to read")
	// ErrResponseFrame wraps ReadResponse's complaints about a response's
	// framing (its size or header): the connection cannot be read on.
	ErrResponseFrame = errors.New("malformed response frame")
)

// Acknowledgement levels, as on the command line.
const (
	AcksNone   = "0"
	AcksLeader = "1"
	AcksAll    = "all"
)

// Compression codecs, as on the command line.
var codecs = map[string]kgo.CompressionCodec{
	"none":   kgo.NoCompression(),
	"gzip":   kgo.GzipCompression(),
	"snappy": kgo.SnappyCompression(),
	"lz4":    kgo.Lz4Compression(),
	"zstd":   kgo.ZstdCompression(),
}

// minE2ERecordSize holds the due time stamped into every E2E value.
const minE2ERecordSize = 8

// maxRecordSize keeps one record well inside a default 1 MiB batch.
const maxRecordSize = 1 << 20

// Config describes one run.
type Config struct {
	Brokers []string // seed brokers, host:port
	Topic   string

	// Partitions and ReplicationFactor are used when the topic has to be created;
	// an existing topic is used as it is. TopicConfigs are set on creation only.
	Partitions        int32
	ReplicationFactor int16
	TopicConfigs      map[string]string

	RecordSize int // value bytes per record
	// Payload is what the values hold: PayloadLetters (also when empty) or
	// PayloadText.
	Payload     string
	Count       int64         // records to produce or read; 0: run for Duration
	Duration    time.Duration // bound on the run (the whole run if Count is 0)
	Rate        int           // records/s over all producers; 0: unthrottled
	Acks        string        // AcksNone, AcksLeader or AcksAll
	Compression string        // none, gzip, snappy, lz4 or zstd
	Producers   int           // producer clients (Produce, E2E)
	// Linger is how long a producer waits for more records before sending a
	// batch; 0 sends at once. franz-go's default is DefaultLinger.
	Linger time.Duration
	// BatchMaxBytes bounds a producer's record batch (Kafka's batch.size); 0
	// keeps franz-go's default, about 1 MB. Smaller batches leave sooner, so
	// the broker writes and syncs a transaction's first records while later
	// ones are still being produced.
	BatchMaxBytes int32
	Consumers     int // consumer clients (Consume, E2E)
	// TransactionRecords, when positive, makes every producer transactional:
	// it commits a transaction every TransactionRecords records (Produce only).
	TransactionRecords int
	// Fanout, when positive, is how many readers each read every record a
	// Produce run writes, while it runs (the design's fan-out to consumer groups).
	Fanout int
	// FanoutRaw makes the fan-out readers raw: each reads every byte of its
	// Fetch answers from the socket but decodes only the batch headers (to count
	// records and move on), so the readers cost the load generator little
	// beside the brokers they measure. Without it each reader is a franz-go
	// consumer that checks, decompresses and decodes every record.
	FanoutRaw bool

	// Group is the share group (or, with ShareClassic, the consumer group) of a
	// Share run; ShareAck says how its members acknowledge (ShareAccept,
	// ShareAckEach, ShareReject or ShareClassic). DeadLetterTopic, with
	// ShareReject, is the group's dead-letter topic (KIP-1191): created when
	// missing with errors.deadletterqueue.group.enable=true, and set as the
	// group's errors.deadletterqueue.topic.name.
	Group           string
	ShareAck        string
	DeadLetterTopic string
	// Connectors are the workers of a Connect run, each setting up one
	// connection after another.
	Connectors int

	// DrainTimeout bounds how long E2E waits, after the last send, for the
	// consumers to see every delivered record, and how long Flush may take.
	DrainTimeout time.Duration

	// Timeline, when positive, is the window of a Produce run's latency per
	// window (Result.Timeline), by each record's due time.
	Timeline time.Duration

	// ClientOpts are added to every client (after the run's own options).
	ClientOpts []kgo.Opt
	// Progress, if set, is told of every finished record (delivered, read, or
	// arrived); it must be safe for concurrent use.
	Progress func(n int64)
}

// DefaultLinger is franz-go's default producer linger, the usual setting for
// throughput runs; latency runs want 0, or the linger is most of what they measure.
const DefaultLinger = 10 * time.Millisecond

// minBatchMaxBytes keeps a batch's overhead small beside its records.
const minBatchMaxBytes = 1 << 10

// DefaultDrainTimeout is DrainTimeout when it is zero.
const DefaultDrainTimeout = 30 * time.Second

// Validate checks the settings a run depends on; mode is "produce", "consume",
// "e2e", "share" or "connect".
func (c *Config) Validate(mode string) error {
	bad := invalidConfig
	if mode == "connect" { // no topic, no records
		switch {
		case len(c.Brokers) == 0:
			return bad("no brokers")
		case c.Count < 0:
			return bad("count must not be negative, got %d", c.Count)
		case c.Duration < 0:
			return bad("duration must not be negative, got %s", c.Duration)
		case c.Count == 0 && c.Duration == 0:
			return bad("give a count or a duration")
		case c.Connectors < 1:
			return bad("connectors must be at least 1, got %d", c.Connectors)
		}
		return nil
	}
	switch {
	case len(c.Brokers) == 0:
		return bad("no brokers")
	case c.Topic == "":
		return bad("no topic")
	case c.Partitions < 1:
		return bad("partitions must be at least 1, got %d", c.Partitions)
	case c.ReplicationFactor < 1:
		return bad("replication factor must be at least 1, got %d", c.ReplicationFactor)
	case c.Count < 0:
		return bad("count must not be negative, got %d", c.Count)
	case c.Duration < 0:
		return bad("duration must not be negative, got %s", c.Duration)
	case c.Count == 0 && c.Duration == 0 && mode != "consume" && mode != "share":
		return bad("give a count or a duration")
	case c.Rate < 0:
		return bad("rate must not be negative, got %d", c.Rate)
	case c.Linger < 0 || c.Linger > time.Minute:
		return bad("linger must be within [0, 1m], got %s", c.Linger)
	case c.BatchMaxBytes < 0 || (c.BatchMaxBytes > 0 && c.BatchMaxBytes < minBatchMaxBytes):
		return bad("batch max bytes must be 0 (the client's default) or at least %d, got %d", minBatchMaxBytes, c.BatchMaxBytes)
	case c.DrainTimeout < 0:
		return bad("drain timeout must not be negative, got %s", c.DrainTimeout)
	case c.TransactionRecords < 0:
		return bad("transaction records must not be negative, got %d", c.TransactionRecords)
	case c.TransactionRecords > 0 && mode != "produce":
		return bad("transactions are measured by produce runs only")
	case c.Fanout < 0:
		return bad("fan-out readers must not be negative, got %d", c.Fanout)
	case c.Fanout > 0 && mode != "produce":
		return bad("fan-out readers are measured by produce runs only")
	case c.FanoutRaw && c.Fanout == 0:
		return bad("raw fan-out readers need fan-out readers")
	case c.TransactionRecords > 0 && c.Acks != AcksAll:
		return bad("transactional producers are idempotent: acks must be all")
	}
	if c.Payload != "" && c.Payload != PayloadLetters && c.Payload != PayloadText {
		return bad("payload %q is not %s or %s", c.Payload, PayloadLetters, PayloadText)
	}
	if _, ok := codecs[c.Compression]; !ok {
		return bad("compression %q is not none, gzip, snappy, lz4 or zstd", c.Compression)
	}
	switch c.Acks {
	case AcksNone, AcksLeader, AcksAll:
	default:
		return bad("acks %q is not 0, 1 or all", c.Acks)
	}
	switch mode {
	case "produce", "e2e":
		if c.Producers < 1 {
			return bad("producers must be at least 1, got %d", c.Producers)
		}
		if c.RecordSize < 0 || c.RecordSize > maxRecordSize {
			return bad("record size must be within [0, %d], got %d", maxRecordSize, c.RecordSize)
		}
	}
	switch mode {
	case "consume", "e2e", "share":
		if c.Consumers < 1 {
			return bad("consumers must be at least 1, got %d", c.Consumers)
		}
	}
	switch mode {
	case "produce", "consume":
	case "share":
		if err := c.validateShare(); err != nil {
			return bad("%s", err)
		}
	case "e2e":
		if c.RecordSize < minE2ERecordSize {
			return bad("e2e records carry a timestamp: record size must be at least %d, got %d", minE2ERecordSize, c.RecordSize)
		}
		if c.Acks == AcksNone {
			return bad("e2e needs acknowledgements to know what was delivered: acks 1 or all")
		}
	default:
		return bad("mode %q is not produce, consume, e2e or share", mode)
	}
	if (mode == "consume" || mode == "share") && c.Count > 0 && (c.RecordSize < 0 || c.RecordSize > maxRecordSize) {
		return bad("record size must be within [0, %d], got %d", maxRecordSize, c.RecordSize)
	}
	return nil
}

// invalidConfig is a Validate complaint.
func invalidConfig(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}

func (c *Config) validateShare() error {
	switch {
	case c.Group == "":
		return errors.New("a share run needs a group")
	case c.ShareAck != ShareAccept && c.ShareAck != ShareAckEach && c.ShareAck != ShareReject && c.ShareAck != ShareClassic:
		return fmt.Errorf("share acknowledgement %q is not %s, %s, %s or %s", c.ShareAck, ShareAccept, ShareAckEach, ShareReject, ShareClassic)
	case c.DeadLetterTopic != "" && c.ShareAck != ShareReject:
		return fmt.Errorf("a dead-letter topic is measured by %s runs only", ShareReject)
	case c.DeadLetterTopic == c.Topic && c.Topic != "":
		return errors.New("the dead-letter topic must not be the topic read")
	}
	return nil
}

func (c *Config) drainTimeout() time.Duration {
	if c.DrainTimeout > 0 {
		return c.DrainTimeout
	}
	return DefaultDrainTimeout
}

// unackedInflight is how many Produce requests a producer keeps in flight to
// a broker with acks 0 or 1. Idempotence needs acks=all, and without it
// franz-go keeps one request in flight unless told otherwise; Kafka's producer
// keeps five (max.in.flight.requests.per.connection), as franz-go does with
// idempotence. With one, acks=1 ran slower than acks=all: 709k-800k against
// 960k-1.01M records/s of 1 KiB on one partition (session 31).
const unackedInflight = 5

// producerOpts are the options of producer client i of the run.
func (c *Config) producerOpts(i int) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.DefaultProduceTopic(c.Topic),
		kgo.ProducerBatchCompression(codecs[c.Compression]),
		kgo.RecordDeliveryTimeout(c.drainTimeout()),
		kgo.ProducerLinger(c.Linger),
	}
	if c.BatchMaxBytes > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(c.BatchMaxBytes))
	}
	if c.TransactionRecords > 0 {
		opts = append(opts, kgo.TransactionalID(fmt.Sprintf("strata-bench-%s-%d", c.Topic, i)))
	}
	switch c.Acks {
	case AcksAll:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case AcksLeader:
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
			kgo.MaxProduceRequestsInflightPerBroker(unackedInflight))
	default:
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite(),
			kgo.MaxProduceRequestsInflightPerBroker(unackedInflight))
	}
	return append(opts, c.ClientOpts...)
}

func (c *Config) progress(n int64) {
	if c.Progress != nil {
		c.Progress(n)
	}
}
