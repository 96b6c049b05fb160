package group

import (
	"maps"
	"slices"
	"time"
)

// This file takes a consumer, streams or share group back to what the log
// holds when a write of its records fails, as Kafka 4.4's coordinator
// runtime reverts its timeline state to the last committed snapshot when an
// append fails (CoordinatorRuntime failing its batch,
// SnapshottableCoordinator.revertLastWrittenOffset): the member that changed
// it is answered with an error, and the group has not moved on.
//
// Nothing is copied before a change, so a heartbeat that changes nothing
// costs nothing: g.written is what the log holds once the writes queued are
// appended, and each queued write keeps what written held of its keys before
// it. When an append fails:
//
//  1. written is taken back, write by write from the newest, to what the log
//     holds;
//  2. the writes of records queued after the failed one, which built on it,
//     leave the queue and fail with it (Kafka fails them with their batch);
//  3. the group's consumer, streams or share side is rebuilt from written as a
//     load builds it (members' sessions start again); a group that became one
//     of them in the failed writes is again what it was (classicView).
//
// A write that cannot be taken back this way (a classic group with members
// converting, or a consumer group turning classic, migration.go; a group
// being deleted), and the writes queued after it, which built on it, leave
// the state as it is, their keys unknown (forgetRecordsLocked): the next
// change writes them again.

// unappendedWrite is a queued write of a group's consumer, streams or share
// records not yet appended.
type unappendedWrite struct {
	// undo is what g.written held of the write's keys before it.
	undo []writtenValue
	// revertible is set when a failure can take the group back (see above).
	revertible bool
}

// writtenValue is what g.written held of key: nothing when !present.
type writtenValue struct {
	key     []byte
	value   []byte
	present bool
}

// classicView is what a group was before it became a consumer, streams or
// share group: its classic side (an Empty classic group or a simple one).
type classicView struct {
	protocolType string
	state        state
	stateTime    time.Time
	subscribed   map[string]struct{}
	subsKnown    bool
	written      map[string][]byte
}

// becomingModernLocked notes, before a classic or simple group becomes a
// consumer, streams or share group, what it was, so that a failed write of
// its first records can restore it.
func (g *group) becomingModernLocked() {
	if g.beforeModern != nil {
		return // the earliest view not yet appended over is the one to restore
	}
	g.beforeModern = &classicView{
		protocolType: g.protocolType, state: g.state, stateTime: g.stateTime,
		subscribed: g.subscribed, subsKnown: g.subsKnown, written: maps.Clone(g.written),
	}
}

// writeRecordsLocked brings g.written in step with recs, about to be
// queued, and returns the write's undo.
func (g *group) writeRecordsLocked(recs []Record) *unappendedWrite {
	if g.written == nil {
		g.written = map[string][]byte{}
	}
	w := &unappendedWrite{
		undo:       make([]writtenValue, len(recs)),
		revertible: g.modernKindLocked() != nil && (g.beforeModern != nil || g.hasModernRecordsLocked()),
	}
	for i, r := range recs {
		v, ok := g.written[string(r.Key)]
		w.undo[i] = writtenValue{key: r.Key, value: v, present: ok}
		if r.Value == nil {
			delete(g.written, string(r.Key))
		} else {
			g.written[string(r.Key)] = r.Value
		}
	}
	g.unappended = append(g.unappended, w)
	return w
}

// hasModernRecordsLocked reports whether written holds a consumer, streams
// or share group's metadata record of the group.
func (g *group) hasModernRecordsLocked() bool {
	var scratch keyScratch
	for _, typ := range []int16{typeConsumerMetadata, typeStreamsMetadata, typeShareMetadata} {
		if len(g.written[string(appendRecordKey(scratch[:0], typ, g.id, ""))]) > 0 {
			return true
		}
	}
	return false
}

// appendedLocked notes that w was appended: the log holds it.
func (g *group) appendedLocked(w *unappendedWrite) {
	if i := slices.Index(g.unappended, w); i >= 0 {
		g.unappended = slices.Delete(g.unappended, i, i+1)
	}
	g.beforeModern = nil
}

// revertLocked takes the group back to what the log holds after w, of
// records recs, failed to be appended with err (see the top of the file).
func (g *group) revertLocked(w *unappendedWrite, recs []Record, err error) {
	i := slices.Index(g.unappended, w)
	switch {
	case i < 0:
		return // reverted with a write before it
	case g.unloaded || g.state == stateDead || !w.revertible:
		g.unappended = slices.Delete(g.unappended, i, i+1)
		// The writes queued after w built on it: their undo holds w's
		// values, which the log never got, so they cannot be taken back
		// either.
		for _, u := range g.unappended[i:] {
			u.revertible = false
		}
		g.forgetRecordsLocked(recs)
		return
	}
	for _, u := range slices.Backward(g.unappended[i:]) {
		for _, v := range u.undo {
			if v.present {
				g.written[string(v.key)] = v.value
			} else {
				delete(g.written, string(v.key))
			}
		}
	}
	later := slices.Clone(g.unappended[i+1:])
	g.unappended = g.unappended[:i]
	var failed []write
	g.writeQ = slices.DeleteFunc(g.writeQ, func(q write) bool {
		if q.modern != nil && slices.Contains(later, q.modern) {
			failed = append(failed, q)
			return true
		}
		return false
	})
	g.rebuildModernLocked()
	for _, q := range failed {
		q.done(0, err)
	}
}

// rebuildModernLocked makes the group's consumer, streams or share side what
// g.written holds, as a load makes it, with its members' timers started.
func (g *group) rebuildModernLocked() {
	r := newReplayed()
	for k, v := range g.written {
		key := []byte(k)
		if dk, err := decodeKey(key); err != nil || len(v) == 0 ||
			(dk.kind != kindConsumer && dk.kind != kindStreams && dk.kind != kindShare) {
			continue
		}
		if err := r.apply(Record{Key: key, Value: v}); err != nil {
			g.c.log.Warn("rebuilding a group after a failed write: record skipped", "group", g.id, "err", err)
		}
	}
	g.stopConsumerTimersLocked()
	g.stopShareTimersLocked()
	g.stopStreamsTimersLocked()
	g.cg, g.sg, g.st = nil, nil, nil
	g.changes = recordChanges{}
	g.forgetLookupsLocked()
	cr, sr, str := r.consumers[g.id], r.shares[g.id], r.streams[g.id]
	switch {
	case cr != nil && cr.metadata != nil:
		g.loadConsumerLocked(cr)
	case sr != nil && sr.metadata != nil:
		g.loadShareLocked(sr)
	case str != nil && str.metadata != nil:
		g.loadStreamsLocked(str)
	case g.beforeModern != nil:
		v := g.beforeModern
		g.protocolType, g.state, g.stateTime = v.protocolType, v.state, v.stateTime
		g.subscribed, g.subsKnown, g.written = v.subscribed, v.subsKnown, v.written
	}
	g.beforeModern = nil
	g.armLoadedConsumerLocked()
	g.armLoadedShareLocked()
	g.armLoadedStreamsLocked()
}
