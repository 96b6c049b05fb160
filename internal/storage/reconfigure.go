package storage

import "fmt"

// Reconfigure replaces the configuration of an open log, as a topic config
// change does. It validates cfg first and changes nothing if it is invalid.
// Each setting takes effect when it is next used:
//
//   - RetentionAge and RetentionBytes at the next retention pass;
//   - SegmentBytes and SegmentAge when the next append decides whether to roll
//     (a smaller SegmentBytes rolls a larger active segment then), and
//     IndexMaxBytes for the segments created from then on;
//   - SegmentJitter for the segments created from then on: each keeps the
//     jitter it drew when it was created (or opened), as in Kafka;
//   - LogAppendTime and IndexIntervalBytes from the next append;
//   - FileDeleteDelay for the segments deleted from then on: those already
//     waiting keep the delay they were deleted with, as in Kafka;
//   - Flush at once: the flusher reads the policy on every wake-up and is
//     woken here, so a new flush interval restarts its ticker and a removed one
//     lets it exit when idle. The mode (GroupCommit or Interval) may not change
//     on an open log: a partition's high-water mark rule depends on it;
//   - Preallocate: turned on, the zeroer starts with the next write; turned
//     off, it stops here and the active segment's file is cut back to its size.
//
// Now, OnSync and OnRoll are replaced too. Reconfigure on a closed log returns
// ErrClosed.
func (l *Log) Reconfigure(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	closed, failed := l.status()
	if closed {
		return ErrClosed
	}
	old := l.conf()
	if cfg.Flush.Mode != old.Flush.Mode {
		return fmt.Errorf("%w: flush mode %v cannot change to %v on an open log", ErrConfig, old.Flush.Mode, cfg.Flush.Mode)
	}
	if old.Preallocate && !cfg.Preallocate {
		if err := l.endPrealloc(failed); failed == nil && err != nil {
			return err
		}
	}
	l.cfg.Store(&cfg)
	if cfg.Flush != old.Flush {
		l.kickFlusher()
	}
	return nil
}
