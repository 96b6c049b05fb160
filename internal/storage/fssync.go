package storage

import (
	"sync"

	"github.com/strata-stream/strata/internal/vfs"
)

// fsSync is a LogDir's group commit across its logs: with it, a log's fsync
// of its active segment becomes a syncfs of the whole filesystem, shared by
// every log that asks while one runs. Callers that arrive while a syncfs runs
// wait for the next one, which starts as soon as that one ends and covers all
// of them: one device flush for many logs where each fsync of a log's file
// would take one of its own.
//
// An error fails the LogDir for good: syncfs does not say whose data it could
// not write, so every later call returns it (each log then fails; Kafka takes
// a log directory offline on an I/O error the same way).
type fsSync struct {
	h  vfs.FSSyncHandle
	mu sync.Mutex
	// started and done count the syncfs calls begun and ended; running is
	// started > done.
	started, done uint64
	ended         *sync.Cond
	waiting       int // callers waiting for a syncfs to end, for tests
	err           error
}

func newFSSync(h vfs.FSSyncHandle) *fsSync {
	s := &fsSync{h: h}
	s.ended = sync.NewCond(&s.mu)
	return s
}

// sync returns once a syncfs that began after the call has ended.
func (s *fsSync) sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := s.started + 1 // the next syncfs to begin
	for s.done < want && s.err == nil {
		if s.started > s.done {
			s.waiting++
			s.ended.Wait()
			s.waiting--
			continue
		}
		s.started++
		s.mu.Unlock()
		err := s.h.SyncFS()
		s.mu.Lock()
		s.done++
		if err != nil && s.err == nil {
			s.err = err
		}
		s.ended.Broadcast()
	}
	return s.err
}
