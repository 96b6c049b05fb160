// Package storage is the partition log engine: one Log per partition directory,
// holding Kafka v2 record batches exactly as produced in segment files, with sparse
// offset and time indexes, a leader-epoch cache, group-commit durability, crash
// recovery, retention and compaction. It does all its disk access through vfs.
//
// # Calling protocol
//
//  1. Open(fs, dir, cfg) recovers the log; its flusher goroutine runs while there
//     is data to fsync.
//  2. The leader calls AssignEpoch(epoch, LogEndOffset()) when it takes over, then
//     Append(batches, epoch) per Produce request; the bytes are validated, stamped
//     with offsets and the epoch in place, and written to the page cache.
//     A follower calls Truncate(offset) after comparing epochs with
//     EndOffsetForEpoch, then AppendAsFollower(batches) with the leader's bytes.
//  3. acks=all producers call WaitDurable(ctx, info.LastOffset); the broker's
//     high-water-mark driver instead registers SetDurableListener, called after each
//     fsync that advances DurableOffset.
//  4. Fetch calls Read(offset, maxBytes, highWatermark), sends the Chunk (sendfile
//     from Chunk.File at Chunk.Pos) and calls Chunk.Release; a read_committed
//     fetch also calls AbortedTxns for the range read. The partition records
//     each abort marker it appends with AddAbortedTxn, and after Open rebuilds
//     the aborted-transaction indexes StaleAbortIndex names (RebuildAbortIndex).
//  5. The broker calls EnforceRetention(highWatermark) periodically, and
//     DeleteRecords for the DeleteRecords API. For a topic with
//     cleanup.policy=compact it calls Compact(highWatermark, opts) periodically
//     (or runs RunCompaction) instead; with "compact,delete" it calls both.
//  6. Close seals the log and leaves a clean-shutdown marker.
//
// A tiered partition (remote.storage.enable) wraps its Log in a Tier: the leader
// calls Tier.Load once, then Tier.Upload periodically and Tier.EnforceRetention
// instead of EnforceRetention; followers call Load and EnforceLocalRetention;
// reads below LogStartOffset go to Tier.Read. tier.go documents the upload
// protocol and tier_manifest.go the remote layout. A file:// store on the log's
// filesystem links sealed segment files rather than copying them, so a sealed
// segment's file may have a second name: the log never changes such a file in
// place (unshare.go).
//
// # Concurrency
//
// Every exported method is safe for concurrent use. Mutations (appends, roll,
// truncation, retention, epoch assignment, Close) are serialised by one append
// mutex held across their I/O, except retention's and DeleteRecords' second half:
// they change the segment list and log start under it, then make the new start
// durable and delete the files after letting it go (a checkpoint mutex orders
// those writes). Readers see a published view (segment list, log
// start and end offsets, durable offset, epoch cache) under a read-write mutex
// that is never held across I/O; the offsets, the newest epoch and whether the
// log failed are also atomics, so LogStartOffset, LogEndOffset,
// DurableOffset, LatestEpoch and (on a healthy log) Err take no lock; each segment's in-memory indexes have their own
// lock, taken after (never while taking) the log's. A segment opened from disk
// loads its indexes and checks them against the log at first use holding only
// a lock of its own (segment.checkMu), which only other first users wait for;
// retention by age, the compaction lag and a truncation make those checks
// before they take the append mutex. A segment file is reference
// counted: Read acquires it and Chunk.Release lets it go, so a segment deleted by
// retention, truncation or compaction is closed only after its last reader is
// done. One flusher goroutine per log does every fsync of the active segment; it
// runs only while there is something to fsync, so an idle log holds none.
// Compaction passes are serialised by their own mutex, taken before the append
// mutex: a pass reads and rewrites sealed segments holding references but no lock,
// and takes the append mutex only to plan and to swap, so appends and reads go on
// during a pass.
//
// Every mutex is only taken in a small function that releases it by defer, so a
// request that panics under one (the broker recovers the panic) leaves it free;
// the exception is the preallocating zeroer's goroutine (prealloc.go), which
// lets its mutex go by hand around each write and fsync and recovers no panic.
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
// With Preallocate the active segment's file runs ahead of its batches (zeros
// written and fsynced in bursts), so that appends overwrite blocks already on
// disk and their fsyncs skip ext4's journal commit; a roll and Close cut the
// file back to its batches before their fsync. See prealloc.go. A file that
// retention released is never reused for a new segment: its old batches'
// headers are not all covered by their CRC, so a torn write over them could
// pass an old batch off as a new one after a power cut.
//
// After each fsync the flusher drops what that fsync made durable from the
// operating system's page cache, but the newest CacheTailBytes of the segment, so
// that appends reuse freed pages rather than take fresh memory (cache.go).
//
// # Recovery
//
// Open first finishes or rolls back a compaction swap a crash interrupted (see
// Compaction). Close writes the clean-shutdown marker last; Open removes it
// (durably) before anything changes. With a marker that matches the files, Open reads no batch.
// Without one, segments wholly below the recovery checkpoint are trusted and every
// later segment is read batch by batch: each must have a valid length and CRC and
// continue the offsets of the one before. The log is cut at the first batch that
// does not (a torn write or corruption), later segments are deleted, indexes are
// rebuilt and the leader-epoch cache is rebuilt from the batches' epochs. A forward
// gap between batches is not a cut: compaction leaves them. A segment whose name
// does not fit its batches (one below its base offset or beyond what its index
// can hold, or a base below the end of the segment before it) is no torn write
// but a misplaced file: Open fails naming it and deletes nothing. The recovery
// point moves on every roll and on Close.
//
// # Directory layout
//
// One directory per partition. Segments are named by their base offset, zero-padded
// to 20 digits:
//
//	00000000000000000000.log        record batches
//	00000000000000000000.index      offset index
//	00000000000000000000.timeindex  time index
//	00000000000000000000.txnindex   aborted transactions whose marker the segment holds (abortidx.go)
//	leader-epoch.checkpoint         epoch -> start offset
//	recovery-point.checkpoint       recovery point, log start offset
//	cleaner-offset.checkpoint       compaction progress and tombstone clocks
//	clean-shutdown                  present only between Close and the next Open
//	cleaner-swap                    present only during a compaction swap
//	00000000000000000000.snapshot   producer-state snapshot at that offset (snapshot.go)
//	*.log.cleaned                   a cleaned segment waiting for its swap
//	*.log.deleted                   a deleted segment waiting for FileDeleteDelay and its
//	                                readers (delete.go)
//	*.deleted, *.tmp                leftovers of a deletion or side-file write (or a file an
//	                                older preallocating binary kept to recycle); Open removes them
//
// # .log
//
// Concatenated Kafka v2 record batches (see package batch for the 61-byte header),
// byte for byte as produced, except the base offset and partition leader epoch
// stamped by the leader and, for LogAppendTime logs, the timestamp type bit, max
// timestamp and CRC. Offsets strictly increase. Until compaction runs they are
// contiguous and the first batch's base offset is the segment's base offset;
// compaction leaves gaps (removed batches) and batches with fewer records than
// offsets (batch.ValidateStored), and may leave a sealed segment empty.
// With Preallocate an active segment's file goes on past its batches with bytes
// that are not the log's (zeros): readers use
// the segment's size, never the file's.
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
// segment's newest timestamp (used by time retention), read at open and checked
// against the log's batch headers at first use (segment.maxTimestamp). Preallocated
// and trimmed like the offset index.
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
// crc is CRC-32C (Castagnoli) over version and payload; version is 1 (the
// cleaner checkpoint and swap manifest: 2 when they hold marker clocks). Payloads:
//
//	leader-epoch.checkpoint    count u32, then count x (epoch i32 | start offset i64)
//	recovery-point.checkpoint  recovery point i64 | log start offset i64
//	clean-shutdown             log end offset i64 | active base offset i64 | active .log size i64
//	cleaner-offset.checkpoint  first dirty offset i64 | count u32, then
//	                           count x (up to i64 | cleaned at ms i64 | tombstones u8);
//	                           version 2 then count u32, then
//	                           count x (from i64 | to i64 | since ms i64 | due u8)
//	cleaner-swap               count u32, then count x (base i64 | end i64),
//	                           then a cleaner-offset.checkpoint payload
//
// The epoch checkpoint is written before the recovery checkpoint, so entries below
// the recovery point are always on disk; entries above it are rebuilt by recovery.
// Without a valid epoch checkpoint, recovery rebuilds the entries below the
// recovery point from those segments' batch headers, which it never cuts (a
// damaged checkpoint and headers that do not parse fail Open).
// In the cleaner checkpoint, range i covers the offsets from range i-1's end (the
// log's start for i = 0) up to its own: they first became clean at "cleaned at",
// and the last pass kept a tombstone among them if "tombstones" is 1. The ranges
// end at the first dirty offset. A marker clock says the transaction markers in
// [from, to] whose transaction is empty wait out the retention from "since" at
// the earliest (see cleanerState). A missing or damaged cleaner checkpoint makes
// everything dirty again, which only delays tombstone removal.
//
// # Compaction
//
// Compact is Kafka's log cleaner. The clean section is every offset below the
// first dirty offset; the dirty section runs from there to the end of the last
// sealed segment wholly below the high-water mark (and, with MinCompactionLag,
// old enough). A pass runs when the dirty bytes are at least MinCleanableDirtyRatio
// of the cleanable bytes, when a dirty sealed segment's first batch is older
// than MaxCompactionLag, or when a clean range holding tombstones (or a marker
// clock) has expired:
//
//  1. Scan the headers of the whole log for each idempotent producer's last batch.
//  2. Read the dirty section into an offset map, key -> offset of its latest
//     record, stopping at a segment boundary once the map is OffsetMapBytes big.
//  3. Rewrite every segment from the log start to the end of the mapped section,
//     in groups of consecutive segments of at most SegmentBytes, into one
//     <base>.log.cleaned per group, fsynced. A record stays unless it has no key,
//     a later record of its key is in the map, or it is a tombstone that has been
//     clean for longer than DeleteRetention. Batches keep their offset ranges
//     (Kafka's rule); see cleaner.filter for how a thinned batch is rewritten and
//     when an emptied one stays. A group of one segment that would not change is
//     left alone.
//  4. Swap the cleaned segments in and checkpoint the new first dirty offset.
//
// The swap, and what Open does after a crash at each step:
//
//	step                                         on disk after it          Open after a crash at it
//	-------------------------------------------  ------------------------  ---------------------------
//	3. <base>.log.cleaned written, fsynced       old segments + .cleaned   removes .cleaned: old log
//	4a. cleaner-swap written (tmp, fsync,        + manifest                4b-4d: new log
//	    rename, dir fsync): the commit point
//	4b. old .log -> .log.deleted, old indexes    + .deleted                4c-4d
//	    removed; .cleaned -> .log; dir fsync
//	4c. new segments published to readers,       new segments + indexes    removes the group's indexes
//	    their indexes written and fsynced                                  (rebuilt on use), 4d
//	4d. cleaner checkpoint written from the      new segments              -
//	    manifest, manifest removed (dir fsync)
//
// Open finishes a swap it finds a manifest for: a group whose .cleaned file is
// still there replaces every segment whose base lies in the group's [base, end);
// a group without one was installed, and only leftover old segments above its
// base go. A failure from 4a on makes the log fail-stop (the manifest may be on
// disk), and reopening finishes the swap; a failure before it leaves the log as it
// was. Groups whose segments retention or DeleteRecords removed during the pass
// are dropped at the swap; a truncation during the pass abandons it.
package storage
