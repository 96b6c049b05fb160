package storage

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// heldSync is an FSSyncHandle whose SyncFS calls block until the test
// releases them, one at a time.
type heldSync struct {
	entered chan struct{} // one per SyncFS call begun
	release chan error    // the result of the SyncFS call running
	mu      sync.Mutex
	calls   int
}

func newHeldSync() *heldSync {
	return &heldSync{entered: make(chan struct{}, 16), release: make(chan error)}
}

func (h *heldSync) SyncFS() error {
	h.mu.Lock()
	h.calls++
	h.mu.Unlock()
	h.entered <- struct{}{}
	return <-h.release
}

func (h *heldSync) Close() error { return nil }

func (h *heldSync) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

// syncCaller runs s.sync on a goroutine and returns its result channel.
func syncCaller(s *fsSync) <-chan error {
	done := make(chan error, 1)
	go func() { done <- s.sync() }()
	return done
}

// syncfsBegins waits for the next SyncFS call to begin.
func syncfsBegins(t *testing.T, h *heldSync) {
	t.Helper()
	select {
	case <-h.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no syncfs began")
	}
}

func notDone(t *testing.T, name string, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s returned (%v) before a syncfs begun after it ended", name, err)
	default:
	}
}

// TestFSSyncSharesOneSyncfs: callers that arrive while a syncfs runs are not
// covered by it (their data may have been written after it began); they wait
// for the next, which starts when it ends and covers all of them at once.
func TestFSSyncSharesOneSyncfs(t *testing.T) {
	h := newHeldSync()
	s := newFSSync(h)
	first := syncCaller(s)
	syncfsBegins(t, h)
	var late []<-chan error
	for range 5 {
		late = append(late, syncCaller(s))
	}
	// The late callers are parked on the condition, not in a syncfs of their own.
	wait.For(t, "the late callers to wait", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.waiting == len(late)
	})
	for _, c := range late {
		notDone(t, "a late caller", c)
	}
	h.release <- nil
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	syncfsBegins(t, h) // the second, for every late caller
	for _, c := range late {
		notDone(t, "a late caller", c)
	}
	h.release <- nil
	for _, c := range late {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	if n := h.count(); n != 2 {
		t.Fatalf("%d syncfs calls for 6 callers in two waves, want 2", n)
	}
}

// TestFSSyncErrorIsForEveryLog: a failed syncfs cannot say whose data it
// failed to write, so its error is every caller's from then on, without
// another syncfs.
func TestFSSyncErrorIsForEveryLog(t *testing.T) {
	h := newHeldSync()
	s := newFSSync(h)
	errIO := errors.New("injected write-back error")
	first := syncCaller(s)
	syncfsBegins(t, h)
	second := syncCaller(s)
	wait.For(t, "the second caller to wait", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.waiting == 1
	})
	h.release <- errIO
	for _, c := range []<-chan error{first, second} {
		select {
		case err := <-c:
			if !errors.Is(err, errIO) {
				t.Fatalf("sync = %v, want the syncfs error", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a caller still waits after the syncfs failed")
		}
	}
	if err := s.sync(); !errors.Is(err, errIO) {
		t.Fatalf("a later sync = %v, want the first error", err)
	}
	if n := h.count(); n != 1 {
		t.Fatalf("%d syncfs calls, want 1: none after the failure", n)
	}
}

// TestLogDirSyncFilesystem: with SyncFilesystem the logs' appends are made
// durable by syncfs alone (no fsync of a segment), and one failed syncfs
// fails every log that syncs after it, the other logs' too: syncfs does not
// say whose pages it could not write.
func TestLogDirSyncFilesystem(t *testing.T) {
	mem := vfs.NewMem()
	cnt := newOpCounter()
	var failing atomic.Bool
	errIO := errors.New("injected syncfs failure")
	fsys := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpSyncFS && failing.CompareAndSwap(true, false) {
			return errIO
		}
		return cnt.MaybeError(op)
	}))
	d := openLogDirWith(t, fsys, LogDirOptions{SyncFilesystem: true})
	logs := make([]*Log, 3)
	for i := range logs {
		l, err := d.Open(fmt.Sprintf("t-%d", i), logDirCfg)
		if err != nil {
			t.Fatal(err)
		}
		logs[i] = l
	}
	cnt.on.Store(true)
	for _, l := range logs {
		appendN(t, l, 3, 2, 40, 0, 0)
		if err := l.WaitDurable(ctxTimeout(t), l.LogEndOffset()-1); err != nil {
			t.Fatal(err)
		}
	}
	cnt.on.Store(false)
	syncs, paths := cnt.get(vfs.OpSync)
	syncFS, _ := cnt.get(vfs.OpSyncFS)
	if slices.ContainsFunc(paths, func(p string) bool { return strings.HasSuffix(p, logSuffix) }) || syncFS == 0 {
		t.Fatalf("appends made durable by %d fsyncs %v and %d syncfs; want no segment fsync, some syncfs", syncs, paths, syncFS)
	}

	failing.Store(true)
	appendN(t, logs[0], 1, 2, 40, 0, 0)
	if err := logs[0].WaitDurable(ctxTimeout(t), logs[0].LogEndOffset()-1); !errors.Is(err, errIO) {
		t.Fatalf("WaitDurable after a failed syncfs = %v, want its error", err)
	}
	// The injector fails no more syncfs: the failure stays the directory's.
	for _, l := range logs[1:] {
		if _, err := l.Append(mkBatch(2, 40, 0), 0); err != nil {
			t.Fatal(err)
		}
		if err := l.WaitDurable(ctxTimeout(t), l.LogEndOffset()-1); !errors.Is(err, errIO) {
			t.Fatalf("another log's WaitDurable after the failed syncfs = %v, want its error", err)
		}
	}
	for _, l := range logs {
		l.Close()
	}
	d.Close()
}
