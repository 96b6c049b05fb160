package bench

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/batch"
)

func TestPayloadSource(t *testing.T) {
	letters := randomLetters(100)
	fixed := newPayloadSource(PayloadLetters, 100, 0, 1, letters)
	if v := fixed.value(); &v[0] != &letters[0] || &fixed.value()[0] != &letters[0] {
		t.Fatal("letters: every value should be the one random value")
	}

	const size = 1000
	pool := textPool()
	first := newPayloadSource(PayloadText, size, 0, 2, letters)
	second := newPayloadSource(PayloadText, size, 1, 2, letters)
	if first.next == second.next {
		t.Fatalf("two producers start at the same place, %d", first.next)
	}
	seen := map[string]bool{}
	for range 2 << 20 / size { // more than a batch's worth
		v := first.value()
		if len(v) != size || seen[string(v)] {
			t.Fatalf("value of %d bytes, repeated %v", len(v), seen[string(v)])
		}
		seen[string(v)] = true
	}
	// At the pool's end the values wrap to its start.
	first.next = len(pool) - size - 1
	if v := first.value(); !bytes.Equal(v, pool[len(pool)-size-1:len(pool)-1]) {
		t.Fatal("the last whole value of the pool was not handed out")
	}
	if v := first.value(); !bytes.Equal(v, pool[:size]) {
		t.Fatal("after the pool's end the values did not wrap to its start")
	}
	if v := first.value(); cap(v) != size {
		t.Fatalf("a value's capacity reaches into the next: %d", cap(v))
	}
}

// TestPayloadCompressibility: the letters payload repeats record after record,
// so a codec squeezes a batch of it to almost nothing; the text payload
// compresses as JSON events do, a few times over.
func TestPayloadCompressibility(t *testing.T) {
	const size, records = 1024, 1000
	ratio := func(kind string, codec batch.Codec) float64 {
		src := newPayloadSource(kind, size, 0, 1, randomLetters(size))
		var raw []byte
		for range records {
			raw = append(raw, src.value()...)
		}
		var buf bytes.Buffer
		out, err := batch.Compress(&buf, raw, batch.Compression{Codec: codec, Level: batch.DefaultLevel(codec)})
		if err != nil {
			t.Fatal(err)
		}
		return float64(len(raw)) / float64(len(out))
	}
	for _, codec := range []batch.Codec{batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd} {
		letters, text := ratio(PayloadLetters, codec), ratio(PayloadText, codec)
		t.Logf("codec %d: letters %.1f:1, text %.1f:1", codec, letters, text)
		if letters < 15 {
			t.Errorf("codec %d squeezed the letters payload only %.1f:1", codec, letters)
		}
		if text < 1.5 || text > 8 {
			t.Errorf("codec %d compressed the text payload %.1f:1, want a JSON event stream's few times", codec, text)
		}
	}
}

func TestProduceTextPayload(t *testing.T) {
	brokers := fakeCluster(t)
	ctx := testCtx(t)
	c := runConfig(brokers, "text")
	c.Count, c.RecordSize, c.Payload = 500, 300, PayloadText
	res, err := Produce(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Records != 500 || res.Payload != PayloadText {
		t.Fatalf("%+v", res)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("text"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]bool{}
	for len(seen) < 500 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("after %d values: %v", len(seen), err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Value) != 300 || seen[string(r.Value)] || !bytes.Contains(textPool(), r.Value) {
				t.Fatalf("value of %d bytes (repeated %v) not a distinct slice of the pool: %.40q", len(r.Value), seen[string(r.Value)], r.Value)
			}
			seen[string(r.Value)] = true
		})
	}
}
