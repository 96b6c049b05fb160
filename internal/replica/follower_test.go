package replica

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestFollowerBehindLogStartStartsOver: a follower that comes back after the
// leader deleted records past everything it holds gets OFFSET_OUT_OF_RANGE,
// empties its log and starts over at the leader's log start (Kafka's
// truncateFullyAndStartAt); it catches up and rejoins the ISR.
func TestFollowerBehindLogStartStartsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newMemCluster(t, 2, 1)
		if _, err := c.produce(1, 5); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		c.isolate(2, true)
		time.Sleep(2 * c.lagMax) // the lag limit takes 2 out of the ISR
		synctest.Wait()
		if isr := c.partition().ISR; !slices.Equal(isr, []int32{1}) {
			t.Fatalf("ISR %v after the follower was cut off, want [1]", isr)
		}
		if _, err := c.produce(1, 5); err != nil {
			t.Fatal(err)
		}
		if start, err := c.replica(1).DeleteRecords(8); err != nil || start != 8 {
			t.Fatalf("DeleteRecords(8) = %d, %v", start, err)
		}
		if leo := c.replica(2).LogEndOffset(); leo != 5 {
			t.Fatalf("follower's log end %d before it returns, want 5", leo)
		}

		c.isolate(2, false)
		time.Sleep(time.Second)
		synctest.Wait()
		f := c.replica(2)
		if start, end := f.LogStartOffset(), f.LogEndOffset(); start != 8 || end != 10 {
			t.Fatalf("follower's log is [%d, %d) after it returned, want [8, 10)", start, end)
		}
		if hwm := f.HighWatermark(); hwm != 10 {
			t.Fatalf("follower's HWM %d, want 10", hwm)
		}
		if isr := c.partition().ISR; !slices.Contains(isr, 2) {
			t.Fatalf("the follower did not rejoin the ISR %v", isr)
		}
		c.checkAgreement()
	})
}
