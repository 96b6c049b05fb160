package share

// The share-group offset admin side (DescribeShareGroupOffsets, AlterShareGroupOffsets,
// DeleteShareGroupOffsets): what the group coordinator reads and writes of the
// share-partition state, as Kafka's group coordinator reads and writes it through its
// persister. These helpers only add to the state store; the share-partition leader
// (Manager) is told to drop what it holds in memory so its next request reloads it.

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Summary is what DescribeShareGroupOffsets shows of a share partition.
type Summary struct {
	Start       int64 // the share-partition start offset (SPSO)
	StateEpoch  int32 // counts the initializations of the state (offset resets)
	LeaderEpoch int32 // the data partition's leader epoch the state was written under
	// Done counts the in-flight offsets at or past Start whose delivery is
	// complete (acknowledged or archived): they are not lag.
	Done int64
}

// Lag is KIP-1226's share-partition lag against the partition's high watermark:
// the offsets from Start to hwm whose delivery is not complete. As in Kafka 4.4 it
// is negative when the offsets were altered past the high watermark.
func (s Summary) Lag(hwm int64) int64 {
	return hwm - s.Start - s.Done
}

// NextStateEpoch is the state epoch an alteration of the offsets initializes over
// prev (found: there was one): 1 over none, else one more than prev's, so the
// coordinator fences every write of a leader that loaded prev.
func NextStateEpoch(prev Summary, found bool) int32 {
	if found {
		return prev.StateEpoch + 1
	}
	return 1
}

// GroupKeys lists the share partitions of group that have state: it reads every
// partition of the state topic to its high watermark and keeps the keys of group
// whose latest value is not a tombstone.
func (s *TopicStore) GroupKeys(ctx context.Context, group string) ([]Key, error) {
	if err := s.ensure(ctx); err != nil {
		return nil, err
	}
	ends, err := kadm.NewClient(s.cl).ListEndOffsets(ctx, StateTopic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("share: listing %s end offsets: %w", StateTopic, err)
	}
	want := map[int32]kgo.Offset{}
	remaining := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = kgo.NewOffset().AtStart()
			remaining[o.Partition] = o.Offset
		}
	})
	if len(want) == 0 {
		return nil, nil
	}
	cl, err := s.reader("strata-share-state-scan", want)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	live := map[Key]bool{}
	for len(remaining) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return nil, fmt.Errorf("share: reading %s: %w", StateTopic, ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := remaining[r.Partition]; ok && r.Offset+1 >= end {
				delete(remaining, r.Partition)
			}
			k, ok := decodeKey(r.Key)
			if !ok || k.Group != group {
				return
			}
			live[k] = r.Value != nil
		})
	}
	var out []Key
	for k, ok := range live {
		if ok {
			out = append(out, k)
		}
	}
	return out, nil
}

// keyVersionOf returns the version a key of StateTopic starts with; false when
// it is too short to have one.
func keyVersionOf(b []byte) (uint16, bool) {
	if len(b) < 2 {
		return 0, false
	}
	return binary.BigEndian.Uint16(b), true
}

// decodeKey reads a key of StateTopic; false when it is not one.
func decodeKey(b []byte) (Key, bool) {
	if len(b) < 4 || binary.BigEndian.Uint16(b) != keyVersion {
		return Key{}, false
	}
	n := int(binary.BigEndian.Uint16(b[2:]))
	b = b[4:]
	if len(b) != n+16+4 {
		return Key{}, false
	}
	k := Key{Group: string(b[:n]), Partition: int32(binary.BigEndian.Uint32(b[n+16:]))}
	copy(k.TopicID[:], b[n:n+16])
	return k, true
}

// Unload drops the in-memory state of k on this share-partition leader: its next
// request reloads it from the store. Acquired records go back to being available,
// as after a failover. It is how an alteration or deletion of the durable state by
// the group coordinator reaches a leader on the same node.
func (m *Manager) Unload(k Key) {
	m.unload(k, false)
}

// unload is Unload; with keepLocked it leaves k loaded while some record of it is
// acquired under a lock that has not expired.
func (m *Manager) unload(k Key, keepLocked bool) {
	sp := m.loaded(k)
	if sp == nil {
		return
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	m.flushLocked(context.Background(), sp) // no write of the old state lands after the unload
	if keepLocked && sp.p != nil && sp.p.Locked(m.cfg.Now()) {
		return // checked after the flush, which lets acquisitions in
	}
	m.dropLocked(sp, kerr.RequestTimedOut.Code)
	sp.wakeAllLocked()
}

// unloadGroupIfIdle drops the in-memory state of group's share partitions once
// no other member of group (but except) has a live share session on this node,
// as Kafka's share-group listener does when a group's last session on a broker
// goes: the next member to fetch reads the durable state, which the group
// coordinator may have altered or deleted in between. A session unused for longer
// than the group's lock duration counts as gone (its member vanished without
// closing it). That does not tell whether its member's locks have expired (a
// long poll acquires after its request started; a lock outlives a session
// evicted after sessionIdle, or the group's lock duration was shortened since),
// so a share partition holding an unexpired lock stays loaded: its holder keeps
// the record until the lock expires, as in Kafka. Every other change is durable
// before it is answered, so dropping a state without live locks loses nothing.
func (m *Manager) unloadGroupIfIdle(group, except string) {
	for _, k := range m.idleGroupKeys(group, except) {
		m.unload(k, true)
	}
}

// idleGroupKeys returns the keys of group's share partitions on this node, none
// while a member of group (but except) has a live share session here.
func (m *Manager) idleGroupKeys(group, except string) []Key {
	live := m.groupConfig(group).LockDuration
	now := m.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for sk, s := range m.mu.sessions {
		if sk.group == group && sk.member != except && now.Sub(s.used) <= live {
			return nil
		}
	}
	var keys []Key
	for k := range m.mu.shares {
		if k.Group == group {
			keys = append(keys, k)
		}
	}
	return keys
}

// HighWatermark is a data partition's high watermark, asked of its leader.
func (s *TopicStore) HighWatermark(ctx context.Context, topic string, partition int32) (int64, error) {
	ends, err := kadm.NewClient(s.cl).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return 0, err
	}
	o, ok := ends.Lookup(topic, partition)
	if !ok {
		return 0, fmt.Errorf("share: no end offset for %s-%d", topic, partition)
	}
	return o.Offset, nil
}
