package storage

import (
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/vfs"
)

// published is what the lock-free accessors show.
type published struct {
	logStart, leo, durable int64
	latestEpoch            int32
	failed                 bool
}

func publishedOf(l *Log) published {
	return published{l.LogStartOffset(), l.LogEndOffset(), l.DurableOffset(), l.LatestEpoch(), l.Err() != nil}
}

// lockedView is the same read under the log's lock, from the fields the
// mutators change.
func lockedView(l *Log) published {
	l.mu.RLock()
	defer l.mu.RUnlock()
	latest := UndefinedEpoch
	if e, ok := l.mu.epochs.latest(); ok {
		latest = e.Epoch
	}
	return published{l.mu.logStart.Load(), l.mu.leo.Load(), l.mu.durable.Load(), latest, l.mu.failed != nil}
}

// TestPublishedOffsetsTakeNoLock: LogStartOffset, LogEndOffset,
// DurableOffset, LatestEpoch and Err (of a healthy log) answer while another goroutine holds the
// log's lock for writing (an idle fetch session's leader reads them for
// thousands of logs per long poll), and after every kind of change they agree
// with the state under the lock: appends as leader and follower, epoch
// assignment, truncation, DeleteRecords, a full truncation, a reopen and a
// failed fsync.
func TestPublishedOffsetsTakeNoLock(t *testing.T) {
	mem := vfs.NewMem()
	rule := vfs.FailOn(vfs.OpSync).Path("*.log")
	rule.Disable()
	fsys := vfs.NewErrorFS(mem, rule)
	l := openLog(t, fsys, Config{})
	ctx := ctxTimeout(t)
	durableEnd := func() error { return l.WaitDurable(ctx, l.LogEndOffset()-1) }
	steps := []struct {
		name string
		do   func() error
		want published
	}{
		{"open", func() error { return nil }, published{0, 0, 0, UndefinedEpoch, false}},
		{"assign epoch 1", func() error { return l.AssignEpoch(1, 0) }, published{0, 0, 0, 1, false}},
		{"append 10 at epoch 1", func() error { appendN(t, l, 5, 2, 10, 0, 1); return durableEnd() }, published{0, 10, 10, 1, false}},
		{"assign epoch 3", func() error { return l.AssignEpoch(3, 10) }, published{0, 10, 10, 3, false}},
		{"append 10 at epoch 3", func() error { appendN(t, l, 5, 2, 10, 0, 3); return durableEnd() }, published{0, 20, 20, 3, false}},
		{"truncate into epoch 1", func() error { return l.Truncate(8) }, published{0, 8, 8, 1, false}},
		{"follower append at epoch 4", func() error {
			b := mkBatch(2, 10, 0)
			batch.SetBaseOffset(b, 8)
			batch.SetPartitionLeaderEpoch(b, 4)
			if _, err := l.AppendAsFollower(b); err != nil {
				return err
			}
			return durableEnd()
		}, published{0, 10, 10, 4, false}},
		{"delete records", func() error { return l.DeleteRecords(4) }, published{4, 10, 10, 4, false}},
		{"reopen", func() error {
			if err := l.Close(); err != nil {
				return err
			}
			l = openLog(t, fsys, Config{})
			return nil
		}, published{4, 10, 10, 4, false}},
		{"truncate fully", func() error { return l.TruncateFullyAndStartAt(50) }, published{50, 50, 50, UndefinedEpoch, false}},
		{"failed fsync", func() error {
			rule.Enable()
			appendN(t, l, 1, 1, 10, 0, 5)
			if err := durableEnd(); err == nil {
				t.Error("WaitDurable after an injected fsync failure succeeded")
			}
			return nil
		}, published{50, 51, 50, 5, true}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := publishedOf(l); got != s.want || got != lockedView(l) {
			t.Fatalf("%s: accessors show %+v, want %+v (under the lock %+v)", s.name, got, s.want, lockedView(l))
		}
		l.mu.Lock()
		done := make(chan published, 1)
		go func() {
			if s.want.failed { // a failed log's Err reads its error under the lock
				done <- published{l.LogStartOffset(), l.LogEndOffset(), l.DurableOffset(), l.LatestEpoch(), true}
				return
			}
			done <- publishedOf(l)
		}()
		select {
		case got := <-done:
			if got != s.want {
				t.Errorf("%s: accessors with the lock held show %+v, want %+v", s.name, got, s.want)
			}
		case <-time.After(10 * time.Second):
			l.mu.Unlock()
			t.Fatalf("%s: the accessors wait for the log's lock", s.name)
		}
		l.mu.Unlock()
	}
}
