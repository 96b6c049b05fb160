package share

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/replica"
)

// Dead-letter topics (KIP-1191). When a share group names a dead-letter topic
// (errors.deadletterqueue.topic.name), a record that fails for good, rejected by a
// member or out of deliveries, becomes Archiving and that state is saved before the
// acknowledgement (or expiry) is answered. A background write per share partition
// then appends one record per Archiving offset to the topic, and only once the
// write is acknowledged (acks=all) are the offsets Archived and saved again. A
// crash between the two leaves them Archiving in the saved state: the next leader
// writes them again (a duplicate, told apart by its headers). A write that fails
// (the topic was deleted, has no leader, is no longer allowed) makes the offsets
// Available again, with their delivery counts, so they can be acquired and fail
// again rather than be lost; the failure is logged and counted (DeadLetterStats).
// With copy.record.enable the write first waits until the leader's high
// watermark passes the records (a new leader's may lag), and a leader deposed
// meanwhile writes nothing and keeps them Archiving for its successor.

// The headers of a dead-letter record, after the original record's own headers
// (when the group copies records): UTF-8 text, numbers in decimal.
const (
	HeaderTopic         = "__dlq.errors.topic"
	HeaderPartition     = "__dlq.errors.partition"
	HeaderOffset        = "__dlq.errors.offset"
	HeaderGroup         = "__dlq.errors.group"
	HeaderDeliveryCount = "__dlq.errors.delivery.count"
	HeaderMessage       = "__dlq.errors.message"
)

// DeadLetterConfig is a group's dead-letter configuration.
type DeadLetterConfig struct {
	Topic      string // errors.deadletterqueue.topic.name; "" for none
	CopyRecord bool   // errors.deadletterqueue.copy.record.enable: copy key, value and headers
}

// DeadLetterRecord is one record to append to a dead-letter topic.
type DeadLetterRecord struct {
	Key, Value []byte // nil when the record is not copied
	Headers    []kmsg.Header
	Timestamp  time.Time
}

// DeadLetterWriter appends to dead-letter topics; TopicDeadLetters is the one on a
// Kafka client.
type DeadLetterWriter interface {
	// Produce appends recs to one partition of topic and returns once they are
	// replicated (acks=all).
	Produce(ctx context.Context, topic string, partition int32, recs []DeadLetterRecord) error
	// CreateTopic creates topic with the broker defaults and
	// errors.deadletterqueue.group.enable=true; an existing topic is no error.
	CreateTopic(ctx context.Context, topic string) error
}

// DeadLetterStats counts one group's dead-letter writes on this node.
type DeadLetterStats struct {
	Written int64 // records written to the dead-letter topic
	Failed  int64 // records whose write failed and that became available again
}

// errNoDeadLetterTopic: the group's dead-letter topic was unset after its records
// became Archiving; they are archived without a write.
var errNoDeadLetterTopic = errors.New("share: the group has no dead-letter topic")

// deadLetterTimeout bounds one dead-letter write (topic creation included).
const deadLetterTimeout = 15 * time.Second

// DeadLetterStats returns the dead-letter counts of every group this node wrote
// (or failed to write) dead-letter records for.
func (m *Manager) DeadLetterStats() map[string]DeadLetterStats {
	m.stats.Lock()
	defer m.stats.Unlock()
	out := make(map[string]DeadLetterStats, len(m.stats.groups))
	for g, s := range m.stats.groups {
		out[g] = s
	}
	return out
}

func (m *Manager) count(group string, written, failed int) {
	m.stats.Lock()
	defer m.stats.Unlock()
	s := m.stats.groups[group]
	s.Written += int64(written)
	s.Failed += int64(failed)
	m.stats.groups[group] = s
}

// maybeDeadLetterLocked starts writing sp's Archiving records to the group's
// dead-letter topic, unless a write of sp's is under way (its end starts the next).
func (m *Manager) maybeDeadLetterLocked(sp *sharePartition) {
	if sp.p == nil || sp.dlqBusy {
		return
	}
	dls := sp.p.DeadLetters()
	if len(dls) == 0 {
		return
	}
	p := sp.p
	if !m.goBackground(func() { m.deadLetter(sp, p, dls) }) {
		return
	}
	sp.dlqBusy = true
}

// deadLetter writes dls (Archiving offsets of p) and then archives them, or makes
// them available again when the write failed.
func (m *Manager) deadLetter(sp *sharePartition, p *Partition, dls []DeadLetter) {
	ctx, cancel := context.WithTimeout(m.ctx, deadLetterTimeout)
	defer cancel()
	cfg := m.groupConfig(sp.key.Group)
	err := m.writeDeadLetters(ctx, sp, cfg.DeadLetter, dls)

	if err == nil {
		// Written, whatever became of the state meanwhile (a reload writes
		// them again: the count counts that duplicate too).
		m.count(sp.key.Group, len(dls), 0)
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.dlqBusy = false
	if m.ctx.Err() != nil {
		// The manager is closing: the saved state keeps the offsets Archiving and
		// the next leader writes them.
		return
	}
	if sp.p != p {
		// Reloaded meanwhile: the durable state still has these offsets Archiving
		// and the reload queued them again.
		m.maybeDeadLetterLocked(sp)
		return
	}
	offsets := make([]int64, len(dls))
	for i, d := range dls {
		offsets[i] = d.Offset
	}
	switch {
	case err == nil:
		p.Archive(offsets)
	case errors.Is(err, errNoDeadLetterTopic):
		p.Archive(offsets)
	case errors.Is(err, replica.ErrNotLeader):
		// Deposed while copying: the saved state keeps the offsets Archiving
		// and the new leader writes them; made available here, a save that
		// still got through would hand out again a record whose rejection
		// was answered.
		return
	default:
		m.count(sp.key.Group, 0, len(dls))
		m.log.Warn("dead-letter write failed; the records stay acquirable", "group", sp.key.Group, "topic", sp.topic,
			"partition", sp.key.Partition, "first_offset", offsets[0], "records", len(offsets),
			"dead_letter_topic", cfg.DeadLetter.Topic, "err", err)
		p.Unarchive(offsets)
	}
	if m.saveLocked(m.ctx, sp) == 0 {
		sp.wakeLocked(cfg.Limits, 0)
		m.maybeDeadLetterLocked(sp)
	}
}

// writeDeadLetters appends one dead-letter record per entry of dls to the group's
// dead-letter topic, checking the topic against the cluster's rules first and
// creating it when it is missing and the cluster allows that.
func (m *Manager) writeDeadLetters(ctx context.Context, sp *sharePartition, dl DeadLetterConfig, dls []DeadLetter) error {
	if dl.Topic == "" || m.dlq == nil {
		return errNoDeadLetterTopic
	}
	group := sp.key.Group
	img := m.parts.Image()
	if err := metadata.CheckDeadLetterTopic(img, group, dl.Topic); err != nil {
		return err
	}
	if img.Topic(dl.Topic) == nil {
		if !img.DeadLetterAutoCreate() {
			return fmt.Errorf("DLQ topic does not exist and auto create is disabled on cluster for share group: %s, topic: %s", group, dl.Topic)
		}
		if err := m.dlq.CreateTopic(ctx, dl.Topic); err != nil {
			return fmt.Errorf("creating DLQ topic %s: %w", dl.Topic, err)
		}
		var err error
		if img, err = m.awaitTopic(ctx, dl.Topic); err != nil {
			return err
		}
	}
	t := img.Topic(dl.Topic)
	if len(t.Partitions) == 0 {
		return fmt.Errorf("DLQ topic %s has no partitions", dl.Topic)
	}
	// Kafka's choice: the source partition modulo the topic's partition count.
	target := sp.key.Partition % int32(len(t.Partitions))
	var source map[int64]batch.Record
	if dl.CopyRecord {
		var err error
		if source, err = m.sourceRecords(ctx, sp, dls); err != nil {
			return fmt.Errorf("reading the records to copy: %w", err)
		}
	}
	now := m.cfg.Now()
	recs := make([]DeadLetterRecord, len(dls))
	for i, d := range dls {
		r := DeadLetterRecord{Timestamp: now}
		if src, ok := source[d.Offset]; ok {
			r.Key, r.Value, r.Headers = src.Key, src.Value, src.Headers
		}
		r.Headers = append(r.Headers,
			kmsg.Header{Key: HeaderTopic, Value: []byte(sp.topic)},
			kmsg.Header{Key: HeaderPartition, Value: strconv.AppendInt(nil, int64(sp.key.Partition), 10)},
			kmsg.Header{Key: HeaderOffset, Value: strconv.AppendInt(nil, d.Offset, 10)},
			kmsg.Header{Key: HeaderGroup, Value: []byte(group)},
			kmsg.Header{Key: HeaderDeliveryCount, Value: strconv.AppendInt(nil, int64(d.DeliveryCount), 10)},
			kmsg.Header{Key: HeaderMessage, Value: []byte(failureMessage(d.Why))},
		)
		recs[i] = r
	}
	return m.dlq.Produce(ctx, dl.Topic, target, recs)
}

// failureMessage is the __dlq.errors.message of a record that failed for why.
func failureMessage(why Failure) string {
	switch why {
	case FailureRejected:
		return "The record was rejected by a consumer."
	case FailureDeliveries:
		return "The record reached the delivery count limit."
	}
	return "The record was rejected or reached the delivery count limit."
}

// awaitTopic waits until this node's metadata image has topic (just created).
func (m *Manager) awaitTopic(ctx context.Context, topic string) (*metadata.Image, error) {
	var img *metadata.Image
	err := await(ctx, "the new DLQ topic "+topic, func() (bool, error) {
		img = m.parts.Image()
		return img.Topic(topic) != nil, nil
	})
	return img, err
}

// await polls cond every 20 ms until it holds or fails, or ctx ends; what
// names the wait in the error.
func await(ctx context.Context, what string, cond func() (bool, error)) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if ok, err := cond(); ok || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// sourceRecordBytes bounds one read of the source log for copying records.
const sourceRecordBytes = 1 << 20

// sourceRecords reads the records at dls' offsets (in order) from the local
// replica, for copying them. A new leader's high watermark may still be below
// records its predecessor handed out (it learns it from its followers'
// fetches), and reads stop there, so it first waits until the high watermark
// passes them (a record copied then would have gone out with an empty value).
// A replica that no longer leads fails the write: the records stay Archiving
// in the saved state and the new leader writes them. An offset gone by
// retention is left out: its dead-letter record carries the headers only.
func (m *Manager) sourceRecords(ctx context.Context, sp *sharePartition, dls []DeadLetter) (map[int64]batch.Record, error) {
	rp, err := m.parts.Partition(sp.topic, sp.key.Partition)
	if err != nil { // no replica here any more
		return nil, fmt.Errorf("%w: %v", replica.ErrNotLeader, err)
	}
	end := dls[len(dls)-1].Offset + 1
	if err := await(ctx, "the high watermark to pass the records to copy", func() (bool, error) {
		if !rp.IsLeader() {
			return false, replica.ErrNotLeader
		}
		return rp.HighWatermark() >= end, nil
	}); err != nil {
		return nil, err
	}
	out := make(map[int64]batch.Record, len(dls))
	want := make(map[int64]bool, len(dls))
	for _, d := range dls {
		want[d.Offset] = true
	}
	for _, d := range dls {
		if _, ok := out[d.Offset]; !ok {
			if err := m.readInto(rp, d.Offset, want, out); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// readInto reads the log from offset and copies the wanted records it finds into
// out. Only a replica that no longer leads is an error; an offset the log no
// longer has is left out.
func (m *Manager) readInto(rp *replica.Partition, offset int64, want map[int64]bool, out map[int64]batch.Record) error {
	res, err := rp.Read(offset, sourceRecordBytes, replica.ReadUncommitted)
	if errors.Is(err, replica.ErrNotLeader) {
		return err
	}
	if err != nil {
		return nil
	}
	defer res.Chunk.Release()
	data, err := res.Data()
	if err != nil {
		return nil
	}
	it := batch.NewStoredIter(data)
	for it.Next() {
		if it.Header().Control() {
			continue
		}
		_ = batch.Records(it.Batch(), func(h batch.Header, r batch.Record) error {
			o := h.BaseOffset + int64(r.OffsetDelta)
			if want[o] {
				if _, done := out[o]; !done {
					// The slices alias a buffer valid only during the call.
					c := batch.Record{Key: cloneBytes(r.Key), Value: cloneBytes(r.Value)}
					for _, hd := range r.Headers {
						c.Headers = append(c.Headers, kmsg.Header{Key: hd.Key, Value: cloneBytes(hd.Value)})
					}
					out[o] = c
				}
			}
			return nil
		})
	}
	return nil
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
