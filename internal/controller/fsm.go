package controller

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/strata-stream/strata/internal/metadata"
)

// fsm is the Raft state machine: it applies metadata batches to the image and
// publishes each new image. Raft calls Apply, Snapshot and Restore from one
// goroutine; Image and watch are called from any.
type fsm struct {
	log *slog.Logger
	img atomic.Pointer[metadata.Image]

	// applied counts the bytes of records applied since the process started,
	// appliedAtSnapshot what it was at the last snapshot, snapshotAt when that
	// was (snapshots.go). A snapshot that fails to persist still counts.
	applied, appliedAtSnapshot atomic.Int64
	snapshotAt                 atomic.Int64 // unix nanoseconds
	// maxBytes is Config.SnapshotMaxBytes: passing it signals bytesBound.
	maxBytes   int64
	bytesBound chan struct{}

	mu struct {
		sync.Mutex
		watchers map[chan *metadata.Image]struct{}
		closed   bool
	}
}

var _ raft.FSM = (*fsm)(nil)

func newFSM(log *slog.Logger, maxBytes int64) *fsm {
	f := &fsm{log: log, maxBytes: maxBytes, bytesBound: make(chan struct{}, 1)}
	f.snapshotAt.Store(time.Now().UnixNano())
	f.img.Store(metadata.NewImage())
	f.mu.watchers = make(map[chan *metadata.Image]struct{})
	return f
}

func (f *fsm) image() *metadata.Image { return f.img.Load() }

// Apply applies one batch. A batch that does not decode or apply leaves the
// image unchanged on every node alike (apart from the offset) and its error is
// the proposer's answer.
func (f *fsm) Apply(l *raft.Log) any {
	cur := f.img.Load()
	next := cur
	recs, err := metadata.DecodeBatch(l.Data)
	if err == nil {
		next, err = metadata.ApplyAll(cur, recs)
	}
	if err != nil {
		f.log.Debug("metadata batch rejected", "index", l.Index, "err", err)
	}
	f.publish(next.WithOffset(l.Index))
	if since := f.applied.Add(int64(len(l.Data))) - f.appliedAtSnapshot.Load(); f.maxBytes > 0 && since >= f.maxBytes {
		select {
		case f.bytesBound <- struct{}{}:
		default:
		}
	}
	return err
}

// Snapshot is called for every snapshot, the ones snapshots.go asks for and
// Raft's own, in order with Apply.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.appliedAtSnapshot.Store(f.applied.Load())
	f.snapshotAt.Store(time.Now().UnixNano())
	return fsmSnapshot{img: f.img.Load()}, nil
}

func (f *fsm) lastSnapshot() time.Time { return time.Unix(0, f.snapshotAt.Load()) }

// snapshotDue reports whether a snapshot is due at now: f.maxBytes of records
// applied since the last one, or maxInterval passed with any record applied
// (a bound of 0 or less is off).
func (f *fsm) snapshotDue(maxInterval time.Duration, now time.Time) bool {
	since := f.applied.Load() - f.appliedAtSnapshot.Load()
	switch {
	case since <= 0:
		return false
	case f.maxBytes > 0 && since >= f.maxBytes:
		return true
	default:
		return maxInterval > 0 && now.Sub(f.lastSnapshot()) >= maxInterval
	}
}

func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("controller: reading snapshot: %w", err)
	}
	img, err := metadata.DecodeSnapshot(b)
	if err != nil {
		return fmt.Errorf("controller: restoring snapshot: %w", err)
	}
	f.appliedAtSnapshot.Store(f.applied.Load())
	f.snapshotAt.Store(time.Now().UnixNano())
	f.publish(img)
	return nil
}

// publish makes img the current image and offers it to every watcher without
// blocking: a watcher's one-slot channel always ends up holding the newest image.
func (f *fsm) publish(img *metadata.Image) {
	f.img.Store(img)
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.mu.watchers {
		offerLatest(ch, img)
	}
}

// offerLatest replaces whatever ch holds with img. Callers hold fsm.mu, so no
// other sender races the second send.
func offerLatest(ch chan *metadata.Image, img *metadata.Image) {
	select {
	case ch <- img:
		return
	default:
	}
	select {
	case <-ch:
	default:
	}
	ch <- img
}

// watch registers a watcher primed with the current image.
func (f *fsm) watch() (<-chan *metadata.Image, func()) {
	ch := make(chan *metadata.Image, 1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.closed {
		close(ch)
		return ch, func() {}
	}
	f.mu.watchers[ch] = struct{}{}
	ch <- f.img.Load()
	return ch, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if _, ok := f.mu.watchers[ch]; ok {
			delete(f.mu.watchers, ch)
			close(ch)
		}
	}
}

// closeWatchers closes every watcher's channel; later watches get closed ones.
func (f *fsm) closeWatchers() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.closed = true
	for ch := range f.mu.watchers {
		delete(f.mu.watchers, ch)
		close(ch)
	}
}

// fsmSnapshot encodes an image while Raft keeps applying to newer ones.
type fsmSnapshot struct{ img *metadata.Image }

func (s fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(metadata.EncodeSnapshot(s.img)); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("controller: writing snapshot: %w", err)
	}
	return sink.Close()
}

func (fsmSnapshot) Release() {}
