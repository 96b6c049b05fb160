package controller

import (
	"fmt"
	"sync"
	"time"

	"github.com/strata-stream/strata/internal/metadata"
)

// liveness is the active controller's memory of broker sessions: when each
// broker last heartbeated, whether it is in controlled shutdown, and the
// metadata offsets it must reach before it is unfenced or told to stop. None
// of it is in the metadata log, which marks only a controlled shutdown's start
// (metadata.ControlledShutdownRecord). It keeps no clock: callers pass the
// time, so tests drive it with any times they like.
//
// Everything is per Raft term: the first call of observe in a new term
// forgets every session and starts each registered broker's clock at that
// moment, so a controller failover grants every broker a grace period of one
// session timeout instead of fencing the brokers whose heartbeats went to the
// previous controller. The end of a pause of this controller restarts every
// broker's clock too (keeping the sessions): when nothing observed them for
// more than half a session timeout (the supervisor observes every
// probeInterval, every heartbeat observes), the controller was stalled (its
// process starved, a GC or VM pause) and heard no heartbeat, through no fault
// of the brokers, which it would otherwise fence all at once.
//
// Besides the session timeout, a broker's session ends early once its death
// is proven: the link connection its heartbeats came on closed (or this
// controller took over and has not heard from it yet), which makes it a
// suspect, and then a connection to its controller address was refused,
// which only happens when no process listens there. A heartbeat after the
// refusal clears it. A paused or unreachable broker is never proven dead
// (its kernel still accepts connections, or they time out): the session
// timeout covers it.
//
// Safe for concurrent use; the lock is never held across anything but map
// work.
type liveness struct {
	timeout time.Duration

	mu struct {
		sync.Mutex
		term        uint64
		activeSince time.Time
		// observed is the latest time observe was called with.
		observed time.Time
		sessions map[int32]*session
		// registering holds, per broker id, the registration being proposed
		// (registering) until its session starts (registered).
		registering map[int32]pendingRegistration
	}
}

// pendingRegistration is a broker registration being proposed: its epoch and
// when it was planned.
type pendingRegistration struct {
	epoch int64
	at    time.Time
}

// session is one broker registration's state, as this controller saw it in
// this term.
type session struct {
	epoch         int64
	lastHeartbeat time.Time
	shuttingDown  bool
	// unfenceOffset is the metadata offset the broker must reach to be
	// unfenced; -1 until this controller fences it or first hears from it
	// while it is fenced.
	unfenceOffset int64
	// shutdownOffset is the offset of the last hand-off of its controlled
	// shutdown.
	shutdownOffset int64
	// reportedOffset is the metadata offset the broker reported applying in
	// its last heartbeat, at reportedAt, when the controller's own offset was
	// offsetAtReport. caughtUpAt is the last time the broker was as far as
	// the controller (DescribeQuorum, AddVoter): a heartbeat that reports the
	// controller's offset of its own moment, or that of the heartbeat before
	// (then caught up as of that one), Kafka's rule for a fetching replica,
	// which keeps a broker that applies every change a moment late caught up.
	reportedOffset, offsetAtReport int64
	reportedAt, caughtUpAt         time.Time
	// linkClosedAt is when the link connection that carried its latest
	// heartbeat closed; refusedAt is when a probe of its controller address
	// was refused (zero: never, in this term).
	linkClosedAt, refusedAt time.Time
}

// suspect reports whether the session's broker may be dead: it has not
// heartbeated since the link connection of its heartbeats closed, or not at
// all in this term. s may be nil (no word in this term).
func (s *session) suspect() bool {
	if s == nil || s.lastHeartbeat.IsZero() {
		return true
	}
	return !s.linkClosedAt.IsZero() && !s.lastHeartbeat.After(s.linkClosedAt)
}

// dead reports whether a probe proved the broker's process gone: refused
// after its last heartbeat.
func (s *session) dead() bool {
	return s != nil && !s.refusedAt.IsZero() && !s.lastHeartbeat.After(s.refusedAt)
}

func newLiveness(timeout time.Duration) *liveness {
	l := &liveness{timeout: timeout}
	l.mu.sessions = make(map[int32]*session)
	l.mu.registering = make(map[int32]pendingRegistration)
	return l
}

// observe notes that this node acts as the active controller in term at now;
// a new term starts afresh, and the end of a pause (no observation for more
// than half the session timeout) restarts every broker's clock and returns
// how long the pause was (0 for none).
func (l *liveness) observe(term uint64, now time.Time) (paused time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case term != l.mu.term:
		l.mu.term, l.mu.activeSince = term, now
		clear(l.mu.sessions)
		clear(l.mu.registering)
	case now.Sub(l.mu.observed) > l.timeout/2:
		l.mu.activeSince, paused = now, now.Sub(l.mu.observed)
	}
	if now.After(l.mu.observed) {
		l.mu.observed = now
	}
	return paused
}

// sessionLocked returns the session of broker id's registration epoch,
// replacing one of an older epoch, or nil if epoch is older than the known one.
func (l *liveness) sessionLocked(id int32, epoch int64) *session {
	s := l.mu.sessions[id]
	switch {
	case s == nil || epoch > s.epoch:
		s = &session{epoch: epoch, unfenceOffset: -1, reportedOffset: -1}
		l.mu.sessions[id] = s
	case epoch < s.epoch:
		return nil
	}
	return s
}

// touch records a heartbeat (or registration) of broker id's registration
// epoch received at now. Callers check the epoch against the image first.
func (l *liveness) touch(id int32, epoch int64, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.sessionLocked(id, epoch); s != nil && now.After(s.lastHeartbeat) {
		s.lastHeartbeat = now
	}
}

// registering notes that a registration of broker id at epoch is planned at
// now. The image holds it, unfenced, as soon as it is applied, but its session
// starts only once the registration's other steps are done (registered); until
// then expired counts from now, not from the start of the term: a broker is
// not fenced for the silence of the registration it replaces. A registration
// that never takes effect leaves an entry no broker's epoch matches.
func (l *liveness) registering(id int32, epoch int64, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.registering[id] = pendingRegistration{epoch: epoch, at: now}
}

// registered starts the session of a registration the controller has just
// written, at now: it replaces the session of any other epoch, even a higher
// one, which kept would hide every heartbeat of the new registration until the
// next term (finding 11 in docs/reliability.md, from before epochs were never
// reused).
func (l *liveness) registered(id int32, epoch int64, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.mu.registering, id)
	if s := l.mu.sessions[id]; s == nil || s.epoch != epoch {
		l.mu.sessions[id] = &session{epoch: epoch, unfenceOffset: -1, reportedOffset: -1}
	}
	if s := l.mu.sessions[id]; now.After(s.lastHeartbeat) {
		s.lastHeartbeat = now
	}
}

// currentLocked returns the session of broker b's current registration, or
// nil.
func (l *liveness) currentLocked(b *metadata.Broker) *session {
	if s := l.mu.sessions[b.ID]; s != nil && s.epoch == b.Epoch {
		return s
	}
	return nil
}

// expired returns the unfenced brokers of img whose session is over,
// ascending: their last heartbeat in this term (or, failing one, the start of
// the term) is more than the session timeout before now, or a probe proved
// them dead.
func (l *liveness) expired(img *metadata.Image, now time.Time) []int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []int32
	for _, b := range img.Brokers() {
		if b.Fenced {
			continue
		}
		last := l.mu.activeSince
		s := l.currentLocked(b)
		if s != nil && s.lastHeartbeat.After(last) {
			last = s.lastHeartbeat
		}
		if r, ok := l.mu.registering[b.ID]; s == nil && ok && r.epoch == b.Epoch && r.at.After(last) {
			last = r.at
		}
		if now.Sub(last) > l.timeout || s.dead() {
			ids = append(ids, b.ID)
		}
	}
	return ids
}

// suspects returns the unfenced brokers of img worth probing, ascending: not
// yet proven dead, and silent since the link connection of their heartbeats
// closed or since this term began.
func (l *liveness) suspects(img *metadata.Image) []int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []int32
	for _, b := range img.Brokers() {
		if s := l.currentLocked(b); !b.Fenced && s.suspect() && !s.dead() {
			ids = append(ids, b.ID)
		}
	}
	return ids
}

// linkClosed notes that the link connection that carried the latest
// heartbeat of broker id's registration epoch closed at now.
func (l *liveness) linkClosed(id int32, epoch int64, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.sessionLocked(id, epoch); s != nil && now.After(s.linkClosedAt) {
		s.linkClosedAt = now
	}
}

// refused notes that a probe of broker id's controller address, made while
// its registration epoch was current, was refused at now: its process is
// gone unless a heartbeat arrives later.
func (l *liveness) refused(id int32, epoch int64, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.sessionLocked(id, epoch); s != nil && now.After(s.refusedAt) {
		s.refusedAt = now
	}
}

// proven reports whether broker id's registration epoch was proven dead (see
// refused) and has not heartbeated since.
func (l *liveness) proven(id int32, epoch int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.mu.sessions[id]
	return s != nil && s.epoch == epoch && s.dead()
}

// hasSession reports whether broker id's registration epoch heartbeated (or
// registered) within the session timeout before now and was not proven dead
// since. The failover grace period does not count: it protects brokers from
// fencing, it does not prove that a process is alive.
func (l *liveness) hasSession(id int32, epoch int64, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.mu.sessions[id]
	return s != nil && s.epoch == epoch && !s.lastHeartbeat.IsZero() && now.Sub(s.lastHeartbeat) <= l.timeout && !s.dead()
}

// voterLag says why broker id's registration epoch may not become a voter
// at now, or "" when it may: it must hold a live session (a heartbeat in
// this term within the session timeout, its process not proven dead, not in
// controlled shutdown, which a stopping broker starts with) and have caught
// up with this controller within the session timeout. offset is
// the controller's metadata offset, to say how far behind it is.
func (l *liveness) voterLag(id int32, epoch int64, offset int64, now time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.mu.sessions[id]
	switch {
	case s == nil || s.epoch != epoch || s.reportedAt.IsZero():
		return "has not reported its progress in a heartbeat to this active controller yet"
	case s.dead():
		return "is down: its controller address refused a connection after its last heartbeat"
	case s.shuttingDown:
		return "is in controlled shutdown"
	case now.Sub(s.lastHeartbeat) > l.timeout:
		return fmt.Sprintf("has no live broker session: last heartbeat %v ago (session timeout %v)",
			now.Sub(s.lastHeartbeat).Round(time.Millisecond), l.timeout)
	case s.caughtUpAt.IsZero():
		return fmt.Sprintf("has not caught up with this active controller yet: behind by %d offsets (at %d of %d)",
			offset-s.reportedOffset, s.reportedOffset, offset)
	case now.Sub(s.caughtUpAt) > l.timeout:
		return fmt.Sprintf("last caught up %v ago (session timeout %v): behind by %d offsets (at %d of %d)",
			now.Sub(s.caughtUpAt).Round(time.Millisecond), l.timeout, offset-s.reportedOffset, s.reportedOffset, offset)
	}
	return ""
}

// shuttingDown returns the brokers in controlled shutdown, a copy.
func (l *liveness) shuttingDown() ShuttingDown {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.shuttingDownLocked()
}

func (l *liveness) shuttingDownLocked() ShuttingDown {
	var down ShuttingDown
	for id, s := range l.mu.sessions {
		if s.shuttingDown {
			if down == nil {
				down = make(ShuttingDown)
			}
			down[id] = true
		}
	}
	return down
}

// heartbeat records a validated heartbeat and returns the state
// PlanBrokerHeartbeat needs. A broker asking for controlled shutdown stays in
// it until it registers anew; offset (the image's) becomes the unfence offset
// of a fenced broker this controller has not heard from before.
func (l *liveness) heartbeat(req HeartbeatRequest, fenced bool, offset int64, now time.Time) HeartbeatState {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.sessionLocked(req.BrokerID, req.BrokerEpoch)
	if s == nil {
		// A newer registration exists, so the image would have refused the
		// epoch; answer as if nothing were known.
		return HeartbeatState{ShuttingDown: l.shuttingDownLocked(), UnfenceOffset: offset}
	}
	if now.After(s.lastHeartbeat) {
		s.lastHeartbeat = now
	}
	s.shuttingDown = s.shuttingDown || req.WantShutdown
	switch {
	case req.MetadataOffset >= offset:
		s.caughtUpAt = now
	case !s.reportedAt.IsZero() && req.MetadataOffset >= s.offsetAtReport && s.reportedAt.After(s.caughtUpAt):
		s.caughtUpAt = s.reportedAt
	}
	s.reportedOffset, s.offsetAtReport, s.reportedAt = req.MetadataOffset, offset, now
	if fenced && s.unfenceOffset < 0 {
		s.unfenceOffset = offset
	}
	return HeartbeatState{
		ShuttingDown:   l.shuttingDownLocked(),
		UnfenceOffset:  s.unfenceOffset,
		ShutdownOffset: s.shutdownOffset,
	}
}

// fenced notes that this controller fenced broker id's registration epoch in
// a change the image includes from offset on.
func (l *liveness) fenced(id int32, epoch int64, offset int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.sessionLocked(id, epoch); s != nil {
		s.unfenceOffset = offset
	}
}

// handedOff notes that part of broker id's controlled shutdown took effect at
// offset.
func (l *liveness) handedOff(id int32, epoch int64, offset int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.sessionLocked(id, epoch); s != nil {
		s.shutdownOffset = offset
	}
}

// lastHeard returns when broker id last registered or heartbeated in this
// term, as its latest session records it; zero if it has not.
func (l *liveness) lastHeard(id int32) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.mu.sessions[id]; s != nil {
		return s.lastHeartbeat
	}
	return time.Time{}
}

// progress returns what broker id's last heartbeat in this term reported:
// the metadata offset it had applied, when it said so and when it last
// reported the controller's own offset; ok is false if it has not
// heartbeated in this term.
func (l *liveness) progress(id int32) (offset int64, at, caughtUp time.Time, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.mu.sessions[id]
	if s == nil || s.reportedAt.IsZero() {
		return -1, time.Time{}, time.Time{}, false
	}
	return s.reportedOffset, s.reportedAt, s.caughtUpAt, true
}
