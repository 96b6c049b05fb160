package storage

import "errors"

// Errors returned by a Log. Batch validation failures are returned as the batch
// package's errors (batch.ErrCorrupt / batch.ErrInvalid classes) unchanged.
var (
	// ErrConfig: a Config setting is out of range. Fix the configuration.
	ErrConfig = errors.New("storage: invalid config")
	// ErrClosed: the Log was closed. Not retriable on this Log.
	ErrClosed = errors.New("storage: log closed")
	// ErrLogFailed: an earlier write or fsync failed, so the log is fail-stop: every
	// append and durability wait fails until the log is closed and reopened (a retried
	// fsync can report success without having written the lost pages). The error
	// wraps the original cause. Kafka's KAFKA_STORAGE_ERROR.
	ErrLogFailed = errors.New("storage: log failed; reopen to recover")
	// ErrOffsetOutOfRange: an offset below the log start offset or above the log end
	// offset. Kafka's OFFSET_OUT_OF_RANGE; the caller resets its position.
	ErrOffsetOutOfRange = errors.New("storage: offset out of range")
	// ErrUnexpectedOffset: follower batches that do not start at the log end offset or
	// are not contiguous. The follower refetches from its log end offset.
	ErrUnexpectedOffset = errors.New("storage: batches do not continue the log")
	// ErrFencedLeaderEpoch: an append as leader with an epoch older than the newest the
	// log has seen: a deposed leader. Kafka's FENCED_LEADER_EPOCH.
	ErrFencedLeaderEpoch = errors.New("storage: leader epoch older than the log's latest")
	// ErrEmptyAppend: an append with no batches. Kafka's INVALID_RECORD.
	ErrEmptyAppend = errors.New("storage: append holds no record batches")
	// ErrBatchTooLarge: one append larger than a whole segment. Kafka's
	// RECORD_BATCH_TOO_LARGE.
	ErrBatchTooLarge = errors.New("storage: append larger than segment size")
	// ErrTruncated: WaitDurable on an offset that is no longer (or not yet) in the
	// log: it was removed by Truncate before it became durable.
	ErrTruncated = errors.New("storage: offset is not in the log")
	// ErrCorruptSegment: a segment's bytes below its published end do not parse (disk
	// corruption, or an index pointing into the middle of a batch), or, at Open, a
	// segment file's name does not fit its batches or the segment before it, or a
	// .log file's name is not the 20-digit name Strata writes. Kafka's
	// CORRUPT_MESSAGE / KAFKA_STORAGE_ERROR.
	ErrCorruptSegment = errors.New("storage: corrupt segment")
	// ErrCorruptSideFile: a checkpoint or marker file failed its length, CRC or
	// version check. Open treats such a file as missing and recovers by scanning,
	// except that a damaged leader-epoch checkpoint fails Open where a segment
	// it rebuilds the epochs from does not parse.
	ErrCorruptSideFile = errors.New("storage: corrupt side file")

	// errTornTail (internal): a scanned range ends partway through a batch. Recovery
	// cuts the log there; inside a published range it means corruption.
	errTornTail = errors.New("storage: batch cut short at end of segment")
	// errOffsetGap (internal): a batch whose offsets overlap or go back from the
	// previous one's (a forward gap is legal: compaction leaves them). Recovery cuts
	// the log there.
	errOffsetGap = errors.New("storage: batch offsets not contiguous")
)
