// Package storage is the partition log engine: one Log per partition directory,
// holding Kafka v2 record batches exactly as produced in segment files, with sparse
// offset and time indexes, a leader-epoch cache, group-commit durability, crash
// recovery and retention. It does all its disk access through vfs.
//
// # Calling protocol
//
//  1. Open(fs, dir, cfg) recovers the log and starts its flusher goroutine.
//  2. The leader calls AssignEpoch(epoch, LogEndOffset()) when it takes over, then
//     Append(batches, epoch) per Produce request; the bytes are validated, stamped
//     with offsets and the epoch in place, and written to the page cache.
//     A follower calls Truncate(offset) after comparing epochs with
//     EndOffsetForEpoch, then AppendAsFollower(batches) with the leader's bytes.
//  3. acks=all producers call WaitDurable(ctx, info.LastOffset); the broker's
//     high-water-mark driver instead registers SetDurableListener, called after each
//     fsync that advances DurableOffset.
//  4. Fetch calls Read(offset, maxBytes, highWatermark), sends the Chunk (sendfile
//     from Chunk.File at Chunk.Pos) and calls Chunk.Release.
//  5. The broker calls EnforceRetention(highWatermark) periodically, and
//     DeleteRecords for the DeleteRecords API.
//  6. Close seals the log and leaves a clean-shutdown marker.
//
// # Concurrency
//
// Every exported method is safe for concurrent use. Mutations (appends, roll,
// truncation, retention, epoch assignment, Close) are serialised by one append
// mutex held across their I/O. Readers see a published view (segment list, log
// start and end offsets, durable offset, epoch cache) under a read-write mutex
// that is never held across I/O; each segment's in-memory indexes have their own
// lock, taken after (never while taking) the log's. A segment file is reference
// counted: Read acquires it and Chunk.Release lets it go, so a segment deleted by
// retention or truncation is closed only after its last reader is done. One
// flusher goroutine per log does every fsync of the active segment.
//
// # Durability
//
// Under GroupCommit (the default) the flusher fsyncs whenever the log holds unsynced
// data; appends that arrive during an fsync share the next one, and WaitDurable
// callers wake together. After an fsync that covered several appends, the flusher
// briefly waits for the appenders it woke to return (at most half that fsync's
// duration) so that the next fsync covers them all; see flush.go. Under Interval it fsyncs every IntervalMessages records or
// Interval (Kafka's flush.messages / flush.ms). A roll fsyncs the old segment and
// its indexes, creates the new files and fsyncs the directory before any byte goes
// to the new segment. After any failed write or fsync the log is fail-stop: every
// later mutation and WaitDurable returns ErrLogFailed until the log is reopened,
// because a retried fsync may report success for pages the kernel already dropped.
//
// # Recovery
//
// Close writes the clean-shutdown marker last; Open removes it (durably) before
// anything changes. With a marker that matches the files, Open reads no batch.
// Without one, segments wholly below the recovery checkpoint are trusted and every
// later segment is read batch by batch: each must have a valid length and CRC and
// continue the offsets of the one before. The log is cut at the first batch that
// does not (a torn write or corruption), later segments are deleted, indexes are
// rebuilt and the leader-epoch cache is rebuilt from the batches' epochs. The
// recovery point moves on every roll and on Close.
//
// # Directory layout
//
// One directory per partition. Segments are named by their base offset, zero-padded
// to 20 digits:
//
//	00000000000000000000.log        record batches
//	00000000000000000000.index      offset index
//	00000000000000000000.timeindex  time index
//	leader-epoch.checkpoint         epoch -> start offset
//	recovery-point.checkpoint       recovery point, log start offset
//	clean-shutdown                  present only between Close and the next Open
//	*.deleted, *.tmp                leftovers of a deletion or side-file write; Open removes them
//
// # .log
//
// Concatenated Kafka v2 record batches (see package batch for the 61-byte header),
// byte for byte as produced, except the base offset and partition leader epoch
// stamped by the leader and, for LogAppendTime logs, the timestamp type bit, max
// timestamp and CRC. The first batch's base offset is the segment's base offset and
// offsets are contiguous.
//
// # .index (all integers big-endian)
//
//	+----------------------------+---------------------------+
//	| relative offset  u32       | file position  u32        |  8 bytes, repeated
//	+----------------------------+---------------------------+
//
// One entry per IndexIntervalBytes of log: the base offset (minus the segment's
// base) and position of the first batch after more than that many bytes since the
// previous entry. Both fields strictly increase; the first batch (position 0) is
// implicit. While a segment is active the file is preallocated to IndexMaxBytes and
// the entries live in memory; when the segment is sealed (roll, Close) the file is
// rewritten with exactly its entries. A full index rolls the segment.
//
// # .timeindex
//
//	+------------------------------------+--------------------------+
//	| timestamp  i64 (ms)                | relative offset  u32     |  12 bytes, repeated
//	+------------------------------------+--------------------------+
//
// Written alongside offset-index entries: the largest batch max timestamp so far and
// the relative base offset of the batch that holds it, only when the timestamp grew.
// Sealing appends the segment's largest timestamp, so the last entry is the
// segment's newest timestamp (used by time retention). Preallocated and trimmed like
// the offset index.
//
// # Side files
//
// Checkpoints and the marker are framed and replaced atomically (write name.tmp,
// fsync, rename over name, fsync the directory):
//
//	+-----------+-----------+--------------+---------------------+
//	| len  u32  | crc  u32  | version  u16 | payload (len bytes) |
//	+-----------+-----------+--------------+---------------------+
//
// crc is CRC-32C (Castagnoli) over version and payload; version is 1. Payloads:
//
//	leader-epoch.checkpoint    count u32, then count x (epoch i32 | start offset i64)
//	recovery-point.checkpoint  recovery point i64 | log start offset i64
//	clean-shutdown             log end offset i64 | active base offset i64 | active .log size i64
//
// The epoch checkpoint is written before the recovery checkpoint, so entries below
// the recovery point are always on disk; entries above it are rebuilt by recovery.
package storage
