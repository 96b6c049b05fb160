package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/metadata"
)

func TestLivenessExpiry(t *testing.T) {
	const timeout = 10 * time.Second
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	// Brokers 1-4; 3 is fenced; 4 re-registered (epoch 2).
	img := fence(t, clusterImage(t, 4), 3)
	img = apply(t, img, &metadata.RegisterBrokerRecord{BrokerID: 4, Epoch: 2, Host: "h", Port: 1})

	l := newLiveness(timeout)
	l.observe(1, t0)
	l.touch(1, 1, at(5*time.Second))
	l.touch(4, 1, at(8*time.Second)) // the old registration: does not count
	steps := []struct {
		now  time.Duration
		want []int32
	}{
		{0, nil},
		{timeout, nil}, // the grace period: one full session timeout
		{timeout + 1, []int32{2, 4}},
		{timeout + 5*time.Second, []int32{2, 4}},
		{timeout + 5*time.Second + 1, []int32{1, 2, 4}},
	}
	for _, s := range steps {
		if got := l.expired(img, at(s.now)); !slices.Equal(got, s.want) {
			t.Errorf("expired at t0+%v = %v, want %v", s.now, got, s.want)
		}
	}

	// A heartbeat arriving late (an older time) never moves the clock back.
	l.touch(2, 1, at(20*time.Second))
	l.touch(2, 1, at(12*time.Second))
	if got := l.expired(img, at(30*time.Second)); slices.Contains(got, 2) {
		t.Errorf("broker 2 expired at t0+30s after a heartbeat at t0+20s: %v", got)
	}

	// A new term forgets every session and starts a new grace period.
	l.observe(2, at(time.Minute))
	if got := l.expired(img, at(time.Minute+timeout)); got != nil {
		t.Errorf("expired right after a failover: %v", got)
	}
	l.observe(2, at(time.Minute+timeout/2)) // same term, no pause: no new grace
	if got := l.expired(img, at(time.Minute+timeout+1)); len(got) != 3 {
		t.Errorf("expired after the grace period = %v, want 1, 2 and 4", got)
	}
}

// TestLivenessPause: a controller that observed nothing for more than half a
// session timeout was paused and heard no heartbeat, so every broker gets a
// session timeout from the pause's end; observations closer together grant
// nothing (TestControllerFailoverFencesNoHealthyBroker, internal/chaos: the
// active controller's process stalled for about 2 s under load and then
// fenced all three brokers, its own included).
func TestLivenessPause(t *testing.T) {
	const timeout = 2 * time.Second
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	img := clusterImage(t, 3)
	l := newLiveness(timeout)
	l.observe(1, t0)
	for d := time.Duration(0); d <= timeout; d += timeout / 4 {
		if paused := l.observe(1, at(d)); paused != 0 {
			t.Fatalf("observe at t0+%v = %v, want no pause", d, paused)
		}
		l.touch(1, 1, at(d))
		l.touch(2, 1, at(d))
	}
	l.observe(1, at(timeout+timeout/4))
	if got := l.expired(img, at(timeout+timeout/4)); !slices.Equal(got, []int32{3}) {
		t.Fatalf("expired = %v, want [3]: no pause, broker 3 silent for a session timeout", got)
	}
	// Paused for just over half a session timeout after the last heartbeats.
	resumed := at(timeout + timeout/2 + timeout/4 + 1)
	if paused := l.observe(1, resumed); paused != timeout/2+1 {
		t.Errorf("observe after the pause = %v, want %v", paused, timeout/2+1)
	}
	if got := l.expired(img, resumed.Add(timeout)); len(got) != 0 {
		t.Errorf("expired = %v within a session timeout of the pause's end", got)
	}
	if got := l.expired(img, resumed.Add(timeout+1)); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Errorf("expired = %v a session timeout after the pause, want every silent broker", got)
	}
}

func TestLivenessSessions(t *testing.T) {
	const timeout = 10 * time.Second
	t0 := time.Unix(1000, 0)
	l := newLiveness(timeout)
	l.observe(1, t0)
	if l.hasSession(1, 1, t0) {
		t.Error("the grace period counts as a session")
	}
	l.touch(1, 1, t0)
	tests := []struct {
		epoch int64
		now   time.Time
		want  bool
	}{
		{1, t0.Add(timeout), true},
		{1, t0.Add(timeout + 1), false},
		{2, t0, false},
	}
	for _, tt := range tests {
		if got := l.hasSession(1, tt.epoch, tt.now); got != tt.want {
			t.Errorf("hasSession(1, %d, t0+%v) = %v, want %v", tt.epoch, tt.now.Sub(t0), got, tt.want)
		}
	}

	// Controlled shutdown sticks to the registration; the unfence offset of
	// a fenced broker is set once, from the first heartbeat or the fencing.
	st := l.heartbeat(HeartbeatRequest{BrokerID: 1, BrokerEpoch: 1, WantShutdown: true}, false, 7, t0)
	if !st.ShuttingDown[1] || st.UnfenceOffset != -1 {
		t.Errorf("state = %+v", st)
	}
	l.handedOff(1, 1, 40)
	st = l.heartbeat(HeartbeatRequest{BrokerID: 1, BrokerEpoch: 1}, true, 50, t0)
	if !st.ShuttingDown[1] || st.ShutdownOffset != 40 || st.UnfenceOffset != 50 {
		t.Errorf("state = %+v, want shutting down, shutdown offset 40, unfence offset 50", st)
	}
	if st = l.heartbeat(HeartbeatRequest{BrokerID: 1, BrokerEpoch: 1}, true, 60, t0); st.UnfenceOffset != 50 {
		t.Errorf("unfence offset moved to %d", st.UnfenceOffset)
	}
	l.fenced(1, 1, 70)
	if st = l.heartbeat(HeartbeatRequest{BrokerID: 1, BrokerEpoch: 1}, true, 60, t0); st.UnfenceOffset != 70 {
		t.Errorf("unfence offset after fencing = %d, want 70", st.UnfenceOffset)
	}
	// A new registration starts a new session.
	l.touch(1, 2, t0)
	if down := l.shuttingDown(); down[1] {
		t.Errorf("a new registration is still shutting down: %v", down)
	}
	// Heartbeats of the older registration are ignored.
	l.touch(1, 1, t0.Add(time.Hour))
	if l.hasSession(1, 2, t0.Add(time.Hour)) {
		t.Error("an old registration's heartbeat renewed the new one's session")
	}
}

// TestLivenessProvenDead: which brokers are suspects (worth probing) and
// which are proven dead (fenced without waiting for the session timeout).
func TestLivenessProvenDead(t *testing.T) {
	const timeout = 10 * time.Second
	t0 := time.Unix(1000, 0)
	// Brokers 1, 2 and 4 are live, 3 fenced; 4 re-registered (epoch 2).
	img := fence(t, clusterImage(t, 4), 3)
	img = apply(t, img, &metadata.RegisterBrokerRecord{BrokerID: 4, Epoch: 2, Host: "h", Port: 1})

	type event struct {
		at    time.Duration
		kind  string // "hb", "closed", "refused", "term"
		id    int32
		epoch int64 // 0: the broker's current epoch in img
	}
	tests := []struct {
		name     string
		events   []event
		suspects []int32
		expired  []int32
	}{
		{
			name:     "no word in this term: every live broker is a suspect",
			suspects: []int32{1, 2, 4},
		},
		{
			name:     "heartbeats clear suspicion",
			events:   []event{{1, "hb", 1, 0}, {1, "hb", 2, 0}, {1, "hb", 4, 0}},
			suspects: nil,
		},
		{
			name:     "a heartbeat of the old registration does not count",
			events:   []event{{1, "hb", 1, 0}, {1, "hb", 2, 0}, {1, "hb", 4, 1}},
			suspects: []int32{4},
		},
		{
			name:     "the link of the latest heartbeat closed",
			events:   []event{{1, "hb", 1, 0}, {1, "hb", 2, 0}, {1, "hb", 4, 0}, {2, "closed", 2, 0}},
			suspects: []int32{2},
		},
		{
			name:     "a heartbeat after the close clears it",
			events:   []event{{1, "hb", 1, 0}, {1, "hb", 2, 0}, {1, "hb", 4, 0}, {2, "closed", 2, 0}, {3, "hb", 2, 0}},
			suspects: nil,
		},
		{
			name:     "refused after the close: proven dead, no longer probed",
			events:   []event{{1, "hb", 1, 0}, {1, "hb", 2, 0}, {1, "hb", 4, 0}, {2, "closed", 2, 0}, {3, "refused", 2, 0}},
			suspects: nil,
			expired:  []int32{2},
		},
		{
			name:     "a heartbeat after the refusal: alive after all (a new process, or one in flight)",
			events:   []event{{1, "hb", 1, 0}, {1, "hb", 2, 0}, {1, "hb", 4, 0}, {2, "closed", 2, 0}, {3, "refused", 2, 0}, {4, "hb", 2, 0}},
			suspects: nil,
		},
		{
			name:     "refused at the start of a term, before any heartbeat",
			events:   []event{{1, "hb", 1, 0}, {1, "hb", 4, 0}, {1, "refused", 2, 0}},
			suspects: nil,
			expired:  []int32{2},
		},
		{
			name:     "a refusal of the old registration proves nothing about the new one",
			events:   []event{{1, "hb", 1, 0}, {1, "hb", 2, 0}, {2, "refused", 4, 1}},
			suspects: []int32{4},
		},
		{
			name:   "a fenced broker is neither probed nor fenced again",
			events: []event{{1, "hb", 1, 0}, {1, "hb", 2, 0}, {1, "hb", 4, 0}, {2, "closed", 3, 1}, {3, "refused", 3, 1}},
		},
		{
			name:     "a new term forgets closes and refusals",
			events:   []event{{1, "hb", 1, 0}, {1, "hb", 2, 0}, {1, "hb", 4, 0}, {2, "closed", 2, 0}, {3, "refused", 2, 0}, {4, "term", 0, 0}, {5, "hb", 1, 0}, {5, "hb", 4, 0}},
			suspects: []int32{2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLiveness(timeout)
			l.observe(1, t0)
			now := t0
			for _, e := range tt.events {
				now = t0.Add(e.at * time.Second)
				epoch := e.epoch
				if epoch == 0 && e.id > 0 {
					epoch = img.Broker(e.id).Epoch
				}
				switch e.kind {
				case "hb":
					l.touch(e.id, epoch, now)
				case "closed":
					l.linkClosed(e.id, epoch, now)
				case "refused":
					l.refused(e.id, epoch, now)
				case "term":
					l.observe(2, now)
				}
			}
			if got := l.suspects(img); !slices.Equal(got, tt.suspects) {
				t.Errorf("suspects = %v, want %v", got, tt.suspects)
			}
			if got := l.expired(img, now); !slices.Equal(got, tt.expired) {
				t.Errorf("expired = %v, want %v", got, tt.expired)
			}
			for _, id := range []int32{1, 2, 4} {
				b := img.Broker(id)
				dead := slices.Contains(tt.expired, id)
				if got := l.proven(id, b.Epoch); got != dead {
					t.Errorf("proven(%d) = %v, want %v", id, got, dead)
				}
				if dead && l.hasSession(id, b.Epoch, now) {
					t.Errorf("broker %d proven dead still has a live session", id)
				}
			}
		})
	}
}

// TestLivenessReregisteredAfterUnregister: a broker unregistered and
// registered again with an epoch below its earlier session's (as epochs were
// before PlanRegisterBroker took them from the metadata offset, see
// TestBrokerEpochsNeverReused): the new registration's heartbeats must count,
// or the broker is fenced for
// good (the ops campaign, seed 914: a decommissioned node started again was
// fenced 0.4 s after it registered and never unfenced).
func TestLivenessReregisteredAfterUnregister(t *testing.T) {
	const timeout = 2 * time.Second
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	l := newLiveness(timeout)
	l.observe(1, t0)
	l.touch(4, 3, at(time.Second)) // the registration before UnregisterBroker
	img := apply(t, clusterImage(t, 3), &metadata.RegisterBrokerRecord{BrokerID: 4, Epoch: 1, Host: "h", Port: 1})
	l.registered(4, 1, at(10*time.Second))
	l.touch(4, 1, at(11*time.Second)) // a heartbeat of the new registration
	l.touch(1, 1, at(11*time.Second))
	l.touch(2, 1, at(11*time.Second))
	l.touch(3, 1, at(11*time.Second))
	if got := l.expired(img, at(12*time.Second)); len(got) != 0 {
		t.Fatalf("expired %v one second after every broker's heartbeat; broker 4 re-registered with epoch 1", got)
	}
	if got := l.expired(img, at(13*time.Second+1)); !slices.Equal(got, []int32{1, 2, 3, 4}) {
		t.Fatalf("expired %v after the session timeout, want every broker", got)
	}
}

// TestLivenessCaughtUp: a heartbeat reporting the controller's offset of its
// own moment is caught up then; one reporting only the controller's offset of
// the heartbeat before is caught up as of that one (Kafka's rule for a
// fetching replica), so a broker that applies every change a moment late
// still counts as caught up; voterLag says why a broker may not be a voter.
func TestLivenessCaughtUp(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	hb := func(l *liveness, reported, offset int64, now time.Time, shutdown bool) {
		l.heartbeat(HeartbeatRequest{BrokerID: 1, BrokerEpoch: 1, MetadataOffset: reported, WantShutdown: shutdown}, false, offset, now)
	}
	for _, tt := range []struct {
		name     string
		beats    [][3]int64 // reported, the controller's offset, second
		shutdown bool       // the last heartbeat asks for controlled shutdown
		now      int
		want     time.Time // caughtUpAt
		lag      string    // in voterLag's answer, "" for none
	}{
		{name: "no heartbeat", now: 1, lag: "has not reported its progress"},
		{name: "at the controller's offset", beats: [][3]int64{{10, 10, 1}}, now: 1, want: at(1)},
		{name: "always behind", beats: [][3]int64{{5, 10, 1}, {9, 12, 2}}, now: 2, lag: "behind by 21 offsets (at 9 of 30)"},
		{name: "a moment late", beats: [][3]int64{{5, 10, 1}, {10, 12, 2}}, now: 2, want: at(1)},
		{name: "caught up too long ago", beats: [][3]int64{{10, 10, 1}, {10, 20, 2}, {11, 30, 9}}, now: 9, want: at(1), lag: "last caught up 8s ago"},
		{name: "in controlled shutdown", beats: [][3]int64{{10, 10, 1}}, shutdown: true, now: 1, want: at(1), lag: "controlled shutdown"},
		{name: "session over", beats: [][3]int64{{10, 10, 1}}, now: 7, want: at(1), lag: "no live broker session"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := newLiveness(5 * time.Second)
			l.observe(1, t0)
			for i, b := range tt.beats {
				hb(l, b[0], b[1], at(int(b[2])), tt.shutdown && i == len(tt.beats)-1)
			}
			if _, _, got, _ := l.progress(1); !got.Equal(tt.want) {
				t.Errorf("caught up at %v, want %v", got, tt.want)
			}
			lag := l.voterLag(1, 1, 30, at(tt.now))
			if tt.lag == "" && lag != "" || !strings.Contains(lag, tt.lag) {
				t.Errorf("voterLag = %q, want %q", lag, tt.lag)
			}
		})
	}
}
