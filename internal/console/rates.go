package console

import (
	"sync"
	"time"
)

// rate is messages per second over the window between two samples.
type rate struct {
	PerSecond float64
	Known     bool
}

type partitionKey struct {
	topic     string
	partition int32
}

type offsetSample struct {
	at     time.Time
	offset int64
}

// rateSampler keeps the last two samples of each partition's high-water mark. A
// new sample replaces the older one only once minGap has passed since the newer,
// so a burst of page views does not shrink the window to nothing.
type rateSampler struct {
	minGap time.Duration

	mu      sync.Mutex
	samples map[partitionKey]*[2]offsetSample // [0] older, [1] newer
}

func newRateSampler(minGap time.Duration) *rateSampler {
	return &rateSampler{minGap: minGap, samples: map[partitionKey]*[2]offsetSample{}}
}

// observe records offset at now and returns the rate between the two samples
// kept. A high-water mark that went down (a recreated topic) restarts sampling.
func (s *rateSampler) observe(k partitionKey, now time.Time, offset int64) rate {
	s.mu.Lock()
	defer s.mu.Unlock()
	pair := s.samples[k]
	switch {
	case pair == nil || offset < pair[1].offset:
		s.samples[k] = &[2]offsetSample{{}, {now, offset}}
		return rate{}
	case now.Sub(pair[1].at) >= s.minGap:
		pair[0], pair[1] = pair[1], offsetSample{now, offset}
	}
	dt := pair[1].at.Sub(pair[0].at).Seconds()
	if pair[0].at.IsZero() || dt <= 0 {
		return rate{}
	}
	return rate{PerSecond: float64(pair[1].offset-pair[0].offset) / dt, Known: true}
}

// forget drops the samples of partitions keep rejects (deleted topics).
func (s *rateSampler) forget(keep func(partitionKey) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.samples {
		if !keep(k) {
			delete(s.samples, k)
		}
	}
}
