// Package history owns the record of what a fault-injection run's clients did and
// the checker that judges it: every send with its outcome, every poll with the
// records it returned, and the complete log of each partition read after the
// faults were healed.
//
// # What a history holds
//
//	part       recorded by                       what
//	---------  --------------------------------  ----------------------------------------------
//	Sends      each producer, in send order      key, unique value, outcome (OK at partition/
//	                                             offset, Failed, Unknown) and when it arrived
//	Polls      each reader and group member      one entry per partition per poll: the records
//	                                             (offset, key, value) in the order returned
//	Final      the harness, after healing        every record of every partition, from the log
//	                                             start to the end, read by a fresh consumer
//	GroupEnd   the harness, after healing        offsets the committing group was drained to
//
// Values are unique within a run (the producer and its sequence number), which is
// how the checker tells records apart across offsets.
//
// # The checks
//
// Check reports anomalies by class, the names Jepsen's Kafka checker uses where
// one exists (see the Class constants). A checker that cannot fail proves
// nothing: the tests plant one anomaly of each class in a clean history and
// require it to be flagged.
//
// CheckTxn judges the history of a transactional run (TxnHistory): transactions
// over several partitions with their outcomes, read_committed readers, the final
// read_committed log, each partition's last stable offset against its
// high-water mark, and a read-process-write stage that commits its input offsets
// in its transactions. It flags aborted reads, lost committed writes,
// duplicates, torn transactions, hanging transactions (stuck LSO) and offsets
// that did not move exactly with the output they were committed with.
//
// CheckShare judges a share group's run (ShareHistory): what each poll handed
// out with its delivery count, each acknowledgement with its answer (OK,
// refused, unknown), and the dead-letter topic's records by their headers. It
// flags records neither accepted nor dead-lettered, records accepted twice
// with an answer, records handed out after an answered acknowledgement,
// delivery counts going down, and dead letters that misname their origin.
//
// # Concurrency
//
// A Recorder is safe for concurrent use by every client goroutine of a run;
// History values and Check are plain data and pure functions.
package history

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// Outcome is what a producer learned about one send.
type Outcome uint8

const (
	// Unknown: timed out, cut off or aborted; the record may or may not be in the log.
	Unknown Outcome = iota
	// OK: acknowledged (acks=all) at Partition/Offset.
	OK
	// Failed: definitely not written (the broker rejected it before appending).
	Failed
)

func (o Outcome) String() string {
	switch o {
	case Unknown:
		return "unknown"
	case OK:
		return "ok"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Send is one record a producer sent and what became of it.
type Send struct {
	Producer  int    // which producer (one idempotent producer session)
	Seq       int64  // the producer's send order, from 0
	Key       string // records with one key go to one partition
	Value     string // unique within the run
	Outcome   Outcome
	Partition int32     // OK only
	Offset    int64     // OK only
	At        time.Time // when the outcome arrived
	Err       string    // the error, when not OK
}

// Record is one record as read back.
type Record struct {
	Offset int64
	Key    string
	Value  string
}

// Poll is what one poll returned for one partition to one reader.
type Poll struct {
	// Reader names the consumer; its polls of a partition are checked for skips
	// and regressions unless Group is set.
	Reader string
	// Group marks a member of the committing consumer group: its positions may
	// move back across rebalances, so only what it read is checked.
	Group     bool
	Partition int32
	Records   []Record
	At        time.Time
}

// History is one run's complete record.
type History struct {
	Sends []Send
	Polls []Poll
	// Final is every record of each partition after healing, in offset order.
	Final map[int32][]Record
	// GroupEnd holds, per partition, the offset the committing group was drained
	// to: every final record below it must have been processed. Nil: no group.
	GroupEnd map[int32]int64
}

// Recorder collects sends and polls from many goroutines.
type Recorder struct {
	mu struct {
		sync.Mutex
		sends []Send
		polls []Poll
	}
}

// AddSend records a send's outcome.
func (r *Recorder) AddSend(s Send) {
	r.mu.Lock()
	r.mu.sends = append(r.mu.sends, s)
	r.mu.Unlock()
}

// AddPoll records one partition's share of a poll; empty polls are dropped.
func (r *Recorder) AddPoll(p Poll) {
	if len(p.Records) == 0 {
		return
	}
	r.mu.Lock()
	r.mu.polls = append(r.mu.polls, p)
	r.mu.Unlock()
}

// Snapshot returns copies of the sends and polls so far, in the order recorded.
func (r *Recorder) Snapshot() (sends []Send, polls []Poll) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.mu.sends), slices.Clone(r.mu.polls)
}
