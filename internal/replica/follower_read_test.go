package replica

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/storage"
)

// TestFollowerReadBounds (KIP-392): a follower serves a consumer up to its own
// high-water mark, as Kafka's follower reads a consumer's fetch
// (UnifiedLog.read with FetchIsolation.HIGH_WATERMARK): never a record at or
// above it, even when its log holds more; a fetch between its HWM and its log
// end is answered empty (the consumer long-polls), one past its log end or
// below its log start OFFSET_OUT_OF_RANGE (a Kafka consumer then drops the
// preferred replica and fetches from the leader again).
//
// Follower 2 holds offsets 0-9, but the answer that would have told it the
// HWM is 10 was lost: its HWM lags.
func TestFollowerReadBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newMemCluster(t, 2, 2)
		if _, err := c.produce(1, 5); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		c.loseAnswers(2, 10)
		if _, err := c.produce(1, 5); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		p := c.replica(2)
		hwm, leo := p.HighWatermark(), p.LogEndOffset()
		if p.IsLeader() || hwm <= 0 || hwm >= 10 || leo != 10 {
			t.Fatalf("replica 2: leader %v, HWM %d, log end %d; the test wants a follower holding 10 records with a lower HWM", p.IsLeader(), hwm, leo)
		}
		for _, iso := range []Isolation{ReadUncommitted, ReadCommitted} {
			res, err := p.ReadReplica(0, 1<<20, iso)
			if err != nil || res.HighWatermark != hwm {
				t.Fatalf("isolation %v: read at 0: HWM %d, %v; want HWM %d", iso, res.HighWatermark, err, hwm)
			}
			var next int64
			for b := fetchedBytes(t, res); len(b) > 0; {
				h, err := batch.ParseHeader(b)
				if err != nil {
					t.Fatal(err)
				}
				next = h.LastOffset() + 1
				b = b[h.Size():]
			}
			if next != hwm {
				t.Errorf("isolation %v: read from 0 ends at %d; want the follower's HWM %d, no record above it", iso, next, hwm)
			}
			for _, off := range []int64{hwm, leo} {
				res, err := p.ReadReplica(off, 1<<20, iso)
				if n := len(fetchedBytes(t, res)); err != nil || n > 0 {
					t.Errorf("isolation %v: read at %d (HWM %d, log end %d): %d bytes, %v; want an empty answer", iso, off, hwm, leo, n, err)
				}
			}
			for _, off := range []int64{leo + 1, -1} {
				if _, err := p.ReadReplica(off, 1<<20, iso); !errors.Is(err, storage.ErrOffsetOutOfRange) {
					t.Errorf("isolation %v: read at %d (log [0, %d)): %v; want out of range", iso, off, leo, err)
				}
			}
		}
	})
}
