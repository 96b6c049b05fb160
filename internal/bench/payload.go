package bench

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
)

// The payloads a run's records can carry (Config.Payload).
const (
	// PayloadLetters gives every record the same value of random upper-case
	// letters, as Kafka's ProducerPerformance does without a payload file. It
	// costs the load generator nothing per record, but a batch of it repeats
	// itself record after record, so any codec squeezes it to almost nothing.
	PayloadLetters = "letters"
	// PayloadText gives each record a different slice of a pool of JSON event
	// lines, so a codec finds what it finds in application events (repeated
	// keys and words, varying ids and numbers), never a repeated record.
	PayloadText = "text"
)

// textPoolBytes is the size of the PayloadText pool: eight times the largest
// record and larger than a default batch (about 1 MB), so no batch holds the
// same bytes twice.
const textPoolBytes = 8 << 20

// textPool is the PayloadText pool, built once per process.
var textPool = sync.OnceValue(func() []byte { return eventLines(textPoolBytes, 1) })

// payloadSource hands one producer its record values.
type payloadSource struct {
	fixed []byte // PayloadLetters: the one value
	pool  []byte // PayloadText: the pool values are cut from
	size  int
	next  int // PayloadText: where the next value starts
}

// newPayloadSource returns the source of producer i of n. Text producers start
// at different places in the pool.
func newPayloadSource(kind string, size, i, n int, letters []byte) *payloadSource {
	if kind != PayloadText {
		return &payloadSource{fixed: letters}
	}
	pool := textPool()
	return &payloadSource{pool: pool, size: size, next: (len(pool) - size) / max(n, 1) * i}
}

// value returns the next record value. Callers must not modify it.
func (p *payloadSource) value() []byte {
	if p.pool == nil {
		return p.fixed
	}
	if p.next+p.size > len(p.pool) {
		p.next = 0
	}
	v := p.pool[p.next : p.next+p.size : p.next+p.size]
	p.next += p.size
	return v
}

// eventLines returns n bytes of JSON event lines drawn from a generator
// seeded with seed: the keys and a small vocabulary repeat, ids, times and
// amounts vary, as in a typical application's events.
func eventLines(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	events := []string{"page_view", "add_to_cart", "checkout", "login", "logout", "search", "payment_failed", "refund"}
	regions := []string{"eu-west-1", "eu-central-1", "us-east-1", "us-west-2", "ap-southeast-1"}
	devices := []string{"mobile", "desktop", "tablet"}
	currencies := []string{"EUR", "USD", "GBP", "JPY"}
	paths := []string{"/", "/shop", "/shop/item/", "/cart", "/account", "/search?q="}
	ms := int64(1796630400000) // 2026-12-07T00:00:00Z
	b := make([]byte, 0, n+512)
	for len(b) < n {
		ms += rng.Int64N(40)
		b = append(b, `{"ts":`...)
		b = strconv.AppendInt(b, ms, 10)
		b = append(b, `,"id":"`...)
		b = fmt.Appendf(b, "%016x", rng.Uint64())
		b = append(b, `","user":"user-`...)
		b = strconv.AppendInt(b, rng.Int64N(100000), 10)
		b = append(b, `","event":"`...)
		b = append(b, events[rng.IntN(len(events))]...)
		b = append(b, `","path":"`...)
		b = append(b, paths[rng.IntN(len(paths))]...)
		b = strconv.AppendInt(b, rng.Int64N(10000), 10)
		b = append(b, `","region":"`...)
		b = append(b, regions[rng.IntN(len(regions))]...)
		b = append(b, `","device":"`...)
		b = append(b, devices[rng.IntN(len(devices))]...)
		b = append(b, `","amount":`...)
		b = strconv.AppendInt(b, rng.Int64N(100000), 10)
		b = append(b, `,"currency":"`...)
		b = append(b, currencies[rng.IntN(len(currencies))]...)
		b = append(b, `","latency_ms":`...)
		b = strconv.AppendInt(b, rng.Int64N(2000), 10)
		b = append(b, "}\n"...)
	}
	return b[:n]
}
