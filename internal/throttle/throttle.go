// Package throttle holds the replication throttle of partition moves (Kafka's
// KIP-73): a token bucket of bytes per second, and the topic lists that say
// which replicas it applies to.
//
// A broker has two buckets, one per direction, set from its dynamic configs
// leader.replication.throttled.rate and follower.replication.throttled.rate
// (the broker's own value, else the cluster-wide one; none means unlimited).
// Only replicas a topic's leader.replication.throttled.replicas or
// follower.replication.throttled.replicas lists ("partition:broker,..." or
// "*") are throttled, and only while they are out of the ISR: an in-sync
// replica is never slowed, so a throttle cannot push it out of the ISR.
//
// Calling protocol, on either side of a follower's fetch:
//
//  1. Before reading (leader) or asking (follower) for a throttled replica,
//     call Bucket.Exceeded: when it reports true, leave that replica out of
//     this fetch (the leader answers it with no records).
//  2. After the data moved, Bucket.Record its size. The bucket may go into
//     debt by one fetch's worth; the next Exceeded calls pay it back, so the
//     long-run rate is the configured one.
//
// The bucket takes the time as an argument: it is pure and safe for
// concurrent use.
package throttle

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Unlimited is the rate of a bucket that never throttles (Kafka's default,
// Long.MAX_VALUE).
const Unlimited int64 = math.MaxInt64

// burst is how much unused rate a bucket keeps: one second's worth, so an
// idle bucket lets one second of data through at once and no more.
const burst = time.Second

// stoppedPoll is the Delay of a bucket whose rate is 0: nothing passes until
// the rate changes, so callers look again this often.
const stoppedPoll = time.Second

// Bucket is a token bucket of bytes. The zero value is unlimited.
type Bucket struct {
	// on is limited, published for Limited: a broker asks for each of
	// thousands of partitions per fetch round whether it throttles at all.
	on      atomic.Bool
	mu      sync.Mutex
	limited bool
	rate    int64   // bytes per second, when limited; 0 lets nothing through
	tokens  float64 // may be negative: debt from the last Record
	last    time.Time
}

// SetRate changes the rate, keeping the tokens (at most one second's worth at
// the new rate). A negative rate, or Unlimited, lifts the limit; 0 lets
// nothing through, as in Kafka.
func (b *Bucket) SetRate(rate int64, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if rate < 0 || rate == Unlimited {
		b.limited, b.rate = false, 0
		b.on.Store(false)
		return
	}
	if b.limited && rate == b.rate {
		return
	}
	if !b.limited {
		b.tokens, b.last = float64(rate), now // start with a full second
	}
	b.limited, b.rate = true, rate
	b.on.Store(true)
	b.refillLocked(now)
}

// Limited reports whether the bucket has a rate (Rate is not Unlimited),
// without locking.
func (b *Bucket) Limited() bool { return b.on.Load() }

// Rate returns the rate in bytes per second (Unlimited when there is none).
func (b *Bucket) Rate() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.limited {
		return Unlimited
	}
	return b.rate
}

func (b *Bucket) refillLocked(now time.Time) {
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens += elapsed.Seconds() * float64(b.rate)
		b.last = now
	}
	b.tokens = min(b.tokens, burst.Seconds()*float64(b.rate))
}

// Exceeded reports whether the bucket is out of tokens: a throttled replica
// must wait.
func (b *Bucket) Exceeded(now time.Time) bool {
	return b.Delay(now) > 0
}

// Delay is how long until the bucket has tokens again: 0 when it has some
// now, else at least a millisecond.
func (b *Bucket) Delay(now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.limited {
		return 0
	}
	if b.rate == 0 {
		return stoppedPoll
	}
	b.refillLocked(now)
	if b.tokens > 0 {
		return 0
	}
	d := time.Duration(math.Ceil(-b.tokens / float64(b.rate) * float64(time.Second)))
	return max(d, time.Millisecond)
}

// Record takes n bytes from the bucket.
func (b *Bucket) Record(n int, now time.Time) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.limited {
		return
	}
	b.refillLocked(now)
	b.tokens -= float64(n)
}
