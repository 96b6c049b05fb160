// Package bench is Strata's load generator: it produces, consumes, or does both at
// once against any Kafka-compatible cluster through franz-go, and reports
// throughput and latency percentiles from an HDR histogram. `strata bench` is a thin
// command line over it, and the Kafka comparison harness (bench/compare) runs the
// same workloads against Strata and Apache Kafka.
//
// Modes:
//
//	Produce  records of Config.RecordSize bytes, from Config.Producers clients, for
//	         Config.Count records or Config.Duration, paced to Config.Rate records/s
//	         (0: as fast as the brokers take them). Latency: from the moment a record
//	         was due (paced) or handed to the client (unpaced) to its acknowledgement.
//	Consume  reads the topic from its start with Config.Consumers clients, each
//	         assigned a share of the partitions directly (no group), up to the end
//	         offsets listed at the start, Config.Count records or Config.Duration,
//	         whichever comes first. With Count above what the topic holds, the
//	         difference is produced first, untimed. Latency: each poll that returned
//	         records.
//	E2E      consumers positioned at the end of the topic, then producers at
//	         Config.Rate; every value starts with the time the record was due (unix
//	         nanoseconds, big-endian). Latency: from that time to the record's
//	         arrival at a consumer. Measuring from the due time rather than the
//	         send keeps a stalled broker from hiding its own delay (coordinated
//	         omission); paced sends wake on a fine timer (a timerfd on Linux),
//	         since Go's timers fire up to a millisecond late in an idle process
//	         and that delay would count as the broker's.
//	Share    Config.Consumers members of a new share group (KIP-932) read the
//	         topic from its start (filled to Config.Count first, untimed), each
//	         accepting, accepting and waiting for the broker after every poll
//	         (latency: that wait), or rejecting into a dead-letter topic
//	         (Config.ShareAck); or a classic consumer group reads it, for
//	         comparison. Records/s count from when every share member holds
//	         its assignment (see Share for each mode's window).
//
// `strata bench move` drives the move benchmark (cmd/strata/bench_move.go) with
// Produce for its fill and its paced producer; this package holds its figures
// (MoveResult, Throughput) and the raw disk measurement it compares with
// (DiskWrite: a sequential write and one fsync through a vfs.FS).
//
// Calling protocol:
//
//  1. Fill a Config; Validate reports mistakes as errors wrapping ErrInvalidConfig.
//  2. Call Produce, Consume, E2E or Share with a context; cancelling it ends the run early
//     and still returns what was measured.
//  3. Print the Result with WriteTable, or encode it as JSON (its fields are tagged).
//
// Producers linger Config.Linger before sending a batch. franz-go's own default
// (DefaultLinger, 10ms) suits throughput runs; in a latency run it would be most of
// what is measured, so E2E runs are best given 0.
//
// Throughput counts value bytes only (records x RecordSize), like Kafka's perf
// tools; MB is 10^6 bytes.
//
// Concurrency: a run owns its clients and goroutines and returns after all of them
// have stopped. Config.Progress is called from the clients' goroutines and must be
// safe for concurrent use. Results are plain values.
package bench
