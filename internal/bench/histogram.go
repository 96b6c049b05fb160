package bench

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram range: 1 us to 10 minutes at 3 significant figures (0.1% error).
const (
	histMinMicros = 1
	histMaxMicros = int64(10 * time.Minute / time.Microsecond)
	histSigFigs   = 3
)

// recorder is an HDR histogram of durations in microseconds, safe for concurrent
// use (acknowledgements arrive on the clients' goroutines).
type recorder struct {
	mu struct {
		sync.Mutex
		h *hdrhistogram.Histogram
	}
}

func newRecorder() *recorder {
	r := &recorder{}
	r.mu.h = hdrhistogram.New(histMinMicros, histMaxMicros, histSigFigs)
	return r
}

// record adds one duration; values outside the range are clamped to it so that a
// single wild value cannot vanish from max.
func (r *recorder) record(d time.Duration) {
	us := min(max(d.Microseconds(), histMinMicros), histMaxMicros)
	r.mu.Lock()
	r.mu.h.RecordValue(us) // cannot fail: us is within the range
	r.mu.Unlock()
}

// Latency summarises a histogram in milliseconds.
type Latency struct {
	Of    string  `json:"of"` // what was timed
	Count int64   `json:"count"`
	Min   float64 `json:"min_ms"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p99_9_ms"`
	Max   float64 `json:"max_ms"`
}

func (r *recorder) summary(of string) Latency {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.mu.h
	l := Latency{Of: of, Count: h.TotalCount()}
	if l.Count == 0 {
		return l
	}
	ms := func(us int64) float64 { return float64(us) / 1e3 }
	l.Min, l.Max, l.Mean = ms(h.Min()), ms(h.Max()), h.Mean()/1e3
	l.P50 = ms(h.ValueAtQuantile(50))
	l.P99 = ms(h.ValueAtQuantile(99))
	l.P999 = ms(h.ValueAtQuantile(99.9))
	return l
}
