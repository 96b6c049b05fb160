package cli

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestProgressResolve(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    ProgressSetup
		want ProgressMode
	}{
		{"terminal", ProgressSetup{Terminal: true}, ProgressBar},
		{"not a terminal", ProgressSetup{}, ProgressLines},
		{"json", ProgressSetup{Terminal: true, JSON: true}, ProgressNone},
		{"records on the terminal", ProgressSetup{Terminal: true, StdoutTerminal: true}, ProgressNone},
		{"forced bar", ProgressSetup{Mode: ProgressBar, JSON: true}, ProgressBar},
		{"forced lines", ProgressSetup{Mode: ProgressLines, Terminal: true}, ProgressLines},
		{"off", ProgressSetup{Mode: ProgressNone, Terminal: true}, ProgressNone},
	} {
		if got := tc.s.resolve(); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestLineProgress(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	var buf bytes.Buffer
	p := NewProgress(ProgressSetup{W: &buf, Interval: 10 * time.Second, now: clock.now}, "consume orders", UnitRecords, 1000)
	p.Add(100)
	clock.advance(5 * time.Second)
	p.Add(100) // before the interval: silent
	if buf.Len() != 0 {
		t.Fatalf("printed before the interval: %q", buf.String())
	}
	clock.advance(5 * time.Second)
	p.Add(300) // 500 in 10s: 50/s, 500 left: ETA 10s
	clock.advance(10 * time.Second)
	p.Add(500)
	p.Finish()
	want := "consume orders: 500 records of 1000 records (50%), 50 records/s, ETA 10s\n" +
		"consume orders: 1000 records of 1000 records (100%), 50 records/s, ETA unknown\n" +
		"consume orders: done, 1000 records in 20s, 50 records/s\n"
	if buf.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", buf.String(), want)
	}
}

func TestLineProgressShortWorkIsSilent(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	var buf bytes.Buffer
	p := NewProgress(ProgressSetup{W: &buf, now: clock.now}, "produce t", UnitBytes, 0)
	p.Add(10)
	clock.advance(time.Second)
	p.Finish()
	if buf.Len() != 0 {
		t.Fatalf("short work printed %q", buf.String())
	}
	p = NewProgress(ProgressSetup{W: &buf, now: clock.now, Interval: time.Second}, "produce t", UnitBytes, 0)
	clock.advance(2 * time.Second)
	p.Add(3 << 20)
	if got := buf.String(); got != "produce t: 3.0 MiB, 1.5 MiB/s\n" {
		t.Fatalf("bytes, unknown total: %q", got)
	}
}

func TestBarProgress(t *testing.T) {
	var buf bytes.Buffer
	p := NewProgress(ProgressSetup{W: &buf, Terminal: true}, "produce t", UnitRecords, 10)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { p.Add(1) }) // acknowledgements arrive on many goroutines
	}
	wg.Wait()
	p.Finish()
	if !strings.Contains(buf.String(), "produce t") || !strings.Contains(buf.String(), "records/s") {
		t.Fatalf("bar output %q", buf.String())
	}
	if NewProgress(ProgressSetup{W: &buf, JSON: true}, "x", UnitRecords, 1) != (noProgress{}) {
		t.Fatal("JSON mode reports progress")
	}
}
