package quota

import (
	"net/netip"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/metadata"
)

func ipQuotaImage(t *testing.T, quotas map[string]float64) *metadata.Image {
	t.Helper()
	var recs []metadata.Record
	for name, v := range quotas {
		n := metadata.QuotaName{Set: true, Name: name}
		if name == "" {
			n = metadata.QuotaName{Set: true, Default: true}
		}
		recs = append(recs, metadata.QuotaRecord(metadata.QuotaEntity{IP: n}, metadata.QuotaConnectionCreationRate, v, false))
	}
	img, err := metadata.ApplyAll(metadata.NewImage(), recs)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestConnectionRate scripts KIP-612's per-address rate on a fake clock: the
// 10 s minimum window admits quota x 10 connections at once, the next ones are
// refused (and not counted) with Kafka's delay, and samples older than 11 s
// leave the rate.
func TestConnectionRate(t *testing.T) {
	now := time.Unix(1000, 0)
	m := New(func() time.Time { return now })
	img := ipQuotaImage(t, map[string]float64{"10.0.0.1": 2, "": 1})
	limited, other, free := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
	for i := range 20 {
		if d := m.RecordConnection(img, limited); d != 0 {
			t.Fatalf("connection %d within 2/s over the 10 s window throttled %v", i+1, d)
		}
	}
	// 21 in 10 s is 2.1/s: (2.1 - 2) / 2 x 10 s.
	for range 3 { // refused connections are not counted: the same answer each time
		if d := m.RecordConnection(img, limited); d != 500*time.Millisecond {
			t.Fatalf("21st connection: throttle %v, want 500ms", d)
		}
	}
	// The default quota (1/s) holds the other address to 10 in the window:
	// the 11th is 1.1/s, (1.1 - 1) / 1 x 10 s.
	for range 10 {
		if d := m.RecordConnection(img, other); d != 0 {
			t.Fatalf("default quota: throttled %v within it", d)
		}
	}
	if d := m.RecordConnection(img, other); d != time.Second {
		t.Fatalf("default quota: throttle %v, want 1s", d)
	}
	noDefault := ipQuotaImage(t, map[string]float64{"10.0.0.1": 2})
	for range 100 {
		if d := m.RecordConnection(noDefault, free); d != 0 {
			t.Fatalf("an address without a quota throttled %v", d)
		}
	}
	// A quota lowered under the rate already measured: the delay is bounded by
	// one window ((2.1 - 1) / 1 x 10 s would be 11 s).
	if d := m.RecordConnection(ipQuotaImage(t, map[string]float64{"10.0.0.1": 1}), limited); d != Window {
		t.Fatalf("lowered quota: throttle %v, want %v", d, Window)
	}

	now = now.Add(Samples * Window) // every sample has left the window
	if d := m.RecordConnection(img, limited); d != 0 {
		t.Fatalf("after 11 s: throttled %v", d)
	}
	m.mu.Lock()
	_, kept := m.mu.conns[other]
	sensors := len(m.mu.conns)
	m.mu.Unlock()
	if kept || sensors != 1 { // limited's fresh sample only
		t.Fatalf("after 11 s idle the other sensors remain: %d sensors", sensors)
	}
}

// TestConnectionRateLimit: the broker-wide limit admits limit x 10 connections
// at once, then asks the accept loop to wait (at most one window); unlike the
// per-address quota, the connections it delays still count.
func TestConnectionRateLimit(t *testing.T) {
	now := time.Unix(1000, 0)
	l := NewConnectionRateLimit(5, func() time.Time { return now })
	for i := range 50 {
		if d := l.Record(); d != 0 {
			t.Fatalf("connection %d within 5/s over the 10 s window waits %v", i+1, d)
		}
	}
	// 51 in 10 s is 5.1/s: (5.1 - 5) / 5 x 10 s; then 5.2/s.
	near := func(d, want time.Duration) bool { return (d - want).Abs() < time.Millisecond }
	if d := l.Record(); !near(d, 200*time.Millisecond) {
		t.Fatalf("51st connection waits %v, want 200ms", d)
	}
	if d := l.Record(); !near(d, 400*time.Millisecond) {
		t.Fatalf("52nd connection waits %v, want 400ms (the delayed one counted)", d)
	}
	for range 100 {
		l.Record()
	}
	if d := l.Record(); d != Window {
		t.Fatalf("far over the limit: waits %v, want at most %v", d, Window)
	}
	now = now.Add(Samples * Window)
	if d := l.Record(); d != 0 {
		t.Fatalf("after 11 s: waits %v", d)
	}
}
