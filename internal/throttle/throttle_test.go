package throttle

import (
	"errors"
	"testing"
	"time"
)

func TestBucket(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type step struct {
		at        time.Duration
		rate      int64 // set before the check when non-zero
		record    int
		exceeded  bool
		wantDelay time.Duration
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"zero value is unlimited", []step{
			{at: 0, record: 1 << 30},
			{at: 0, exceeded: false},
		}},
		{"a fresh limit allows one second at once", []step{
			{at: 0, rate: 1000, exceeded: false},
			{at: 0, record: 999},
			{at: 0, exceeded: false},
			{at: 0, record: 1},
			{at: 0, exceeded: true, wantDelay: time.Millisecond},
		}},
		{"debt is paid back at the rate", []step{
			{at: 0, rate: 1000, record: 5000},
			{at: 0, exceeded: true, wantDelay: 4 * time.Second},
			{at: 2 * time.Second, exceeded: true, wantDelay: 2 * time.Second},
			{at: 4 * time.Second, exceeded: true, wantDelay: time.Millisecond},
			{at: 4*time.Second + time.Millisecond, exceeded: false},
		}},
		{"idle time refills at most one second", []step{
			{at: 0, rate: 1000, record: 1000},
			{at: time.Hour, record: 1000},
			{at: time.Hour, exceeded: true},
		}},
		{"lifting the limit", []step{
			{at: 0, rate: 1000, record: 1 << 20},
			{at: 0, exceeded: true},
			{at: 0, rate: -1, exceeded: false},
			{at: 0, rate: Unlimited, record: 1 << 20},
			{at: 0, exceeded: false},
		}},
		{"a new rate refills faster", []step{
			{at: 0, rate: 1000, record: 2000},
			{at: 0, rate: 10000, exceeded: true},
			{at: 150 * time.Millisecond, exceeded: false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b Bucket
			for i, s := range tc.steps {
				if s.rate != 0 {
					b.SetRate(s.rate, at(s.at))
				}
				if s.record > 0 {
					b.Record(s.record, at(s.at))
					continue
				}
				if got := b.Exceeded(at(s.at)); got != s.exceeded {
					t.Fatalf("step %d: Exceeded = %v, want %v", i, got, s.exceeded)
				}
				if s.exceeded && s.wantDelay > 0 {
					if got := b.Delay(at(s.at)); got != s.wantDelay {
						t.Fatalf("step %d: Delay = %v, want %v", i, got, s.wantDelay)
					}
				}
			}
		})
	}
}

func TestBucketStopped(t *testing.T) {
	var b Bucket
	now := time.Unix(0, 0)
	b.SetRate(0, now)
	if !b.Exceeded(now.Add(time.Hour)) || b.Rate() != 0 {
		t.Fatalf("a rate of 0 lets data through: rate %d", b.Rate())
	}
	b.SetRate(Unlimited, now)
	if b.Exceeded(now) || b.Rate() != Unlimited {
		t.Fatalf("Unlimited still throttles: rate %d", b.Rate())
	}
}

// TestBucketRate drives a bucket the way a fetcher does, 64 KiB a fetch as soon
// as it lets one through, and checks the bytes moved over a simulated minute.
func TestBucketRate(t *testing.T) {
	const rate = 1 << 20
	var b Bucket
	now := time.Unix(0, 0)
	b.SetRate(rate, now)
	moved := 0
	end := now.Add(time.Minute)
	for now.Before(end) {
		if d := b.Delay(now); d > 0 {
			now = now.Add(d)
			continue
		}
		b.Record(64<<10, now)
		moved += 64 << 10
		now = now.Add(time.Millisecond)
	}
	got := float64(moved) / 60
	if got < 0.98*rate || got > 1.04*rate {
		t.Fatalf("moved %.0f B/s, want about %d", got, rate)
	}
	if b.Rate() != rate {
		t.Fatalf("Rate() = %d", b.Rate())
	}
}

func TestParseReplicas(t *testing.T) {
	for _, tc := range []struct {
		in   string
		err  bool
		has  [][2]int32
		hasn [][2]int32
	}{
		{in: "", hasn: [][2]int32{{0, 1}}},
		{in: "  ", hasn: [][2]int32{{0, 1}}},
		{in: "*", has: [][2]int32{{0, 1}, {7, 9}}},
		{in: " * ", has: [][2]int32{{3, 3}}},
		{in: "0:1,1:2", has: [][2]int32{{0, 1}, {1, 2}}, hasn: [][2]int32{{0, 2}, {1, 1}}},
		{in: "0:1, ,2:3,", has: [][2]int32{{0, 1}, {2, 3}}},
		{in: "0:1,*", err: true},
		{in: "0-1", err: true},
		{in: "a:1", err: true},
		{in: "1:", err: true},
		{in: "-1:2", err: true},
		{in: "+1:2", err: true},
		{in: "99999999999:1", err: true},
	} {
		r, err := ParseReplicas(tc.in)
		if (err != nil) != tc.err {
			t.Errorf("ParseReplicas(%q) err = %v, want error %v", tc.in, err, tc.err)
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidReplicas) {
				t.Errorf("ParseReplicas(%q) err = %v, not ErrInvalidReplicas", tc.in, err)
			}
			continue
		}
		for _, h := range tc.has {
			if !r.Has(h[0], h[1]) {
				t.Errorf("ParseReplicas(%q).Has(%d, %d) = false", tc.in, h[0], h[1])
			}
		}
		for _, h := range tc.hasn {
			if r.Has(h[0], h[1]) {
				t.Errorf("ParseReplicas(%q).Has(%d, %d) = true", tc.in, h[0], h[1])
			}
		}
	}
}

// TestBucketLimited: Limited, read without the lock, agrees with Rate through
// every kind of SetRate.
func TestBucketLimited(t *testing.T) {
	var b Bucket
	if b.Limited() {
		t.Fatal("the zero Bucket is Limited")
	}
	now := time.Unix(0, 0)
	for _, rate := range []int64{1 << 20, 1 << 20, 0, -1, 5, Unlimited, 7} {
		b.SetRate(rate, now)
		if got, want := b.Limited(), b.Rate() != Unlimited; got != want {
			t.Fatalf("after SetRate(%d): Limited() = %v, Rate() = %d", rate, got, b.Rate())
		}
	}
}
