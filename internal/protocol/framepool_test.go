package protocol

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestFrameClass(t *testing.T) {
	tests := []struct{ size, class int }{
		{1, -1},
		{minPooledFrame / 2, -1},
		{minPooledFrame/2 + 1, 0},
		{minPooledFrame, 0},
		{minPooledFrame + 1, 1},
		{2 * minPooledFrame, 1},
		{maxPooledFrame/2 + 1, frameClasses - 1},
		{maxPooledFrame, frameClasses - 1},
		{maxPooledFrame + 1, -1},
	}
	for _, tt := range tests {
		if got := frameClass(tt.size); got != tt.class {
			t.Errorf("frameClass(%d) = %d, want %d", tt.size, got, tt.class)
		}
		if tt.class >= 0 && minPooledFrame<<tt.class < tt.size {
			t.Errorf("class %d buffers (%d bytes) cannot hold %d", tt.class, minPooledFrame<<tt.class, tt.size)
		}
	}
}

// TestReadPooledFrame: frames of every pooled size, the large ones too, come
// back whole in a buffer of their class, and one cut short is a truncated
// frame; a large frame allocates nothing past eagerFrameBytes before that
// many bytes arrived, and nothing at all once its class has a free buffer.
func TestReadPooledFrame(t *testing.T) {
	for _, size := range []int{minPooledFrame, eagerFrameBytes, eagerFrameBytes + 1, 4*eagerFrameBytes - 100} {
		body := make([]byte, size)
		for i := range body {
			body[i] = byte(i * 7)
		}
		frame, pooled, err := readPooledFrame(bytes.NewReader(body), size)
		if err != nil || !bytes.Equal(frame, body) || len(*pooled) != minPooledFrame<<frameClass(size) {
			t.Fatalf("%d bytes: read %d (buffer of %d), %v", size, len(frame), len(*pooled), err)
		}
		putFrame(pooled)
		for _, cut := range []int{0, size / 2, size - 1} {
			if _, _, err := readPooledFrame(bytes.NewReader(body[:cut]), size); !errors.Is(err, ErrTruncatedFrame) {
				t.Errorf("%d of %d bytes: %v, want a truncated frame", cut, size, err)
			}
		}
	}

	// A size prefix of 64 MiB with a few bytes behind it: the read stops
	// with the first buffer, eagerFrameBytes, never the frame's class (none
	// free: the class's pool is drained first).
	for framePools[frameClass(maxPooledFrame)].Get() != nil {
	}
	var read countingReader
	read.r = bytes.NewReader(make([]byte, 10))
	if _, _, err := readPooledFrame(&read, maxPooledFrame); !errors.Is(err, ErrTruncatedFrame) || read.largest > eagerFrameBytes {
		t.Fatalf("64 MiB frame of 10 bytes: %v, read into %d bytes at most", err, read.largest)
	}

	if raceEnabled {
		return // sync.Pool drops buffers at random under the race detector
	}
	size := 3 * eagerFrameBytes
	body := make([]byte, size)
	_, pooled, err := readPooledFrame(bytes.NewReader(body), size)
	if err != nil {
		t.Fatal(err)
	}
	putFrame(pooled)
	allocs := testing.AllocsPerRun(10, func() {
		_, pooled, err := readPooledFrame(bytes.NewReader(body), size)
		if err != nil {
			t.Fatal(err)
		}
		putFrame(pooled)
	})
	if allocs > 1 { // the bytes.Reader
		t.Errorf("a 3 MiB frame with its class's buffer free allocated %.0f times per read", allocs)
	}
}

// countingReader records the largest buffer it was asked to fill.
type countingReader struct {
	r       io.Reader
	largest int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.largest = max(c.largest, len(p))
	return c.r.Read(p)
}

// TestFrameReuse: a Produce frame's buffer is reused for a later request when
// Produce is in ReuseFrameKeys (so slices of an earlier request kept past its
// response change under the keeper), and never otherwise.
func TestFrameReuse(t *testing.T) {
	const n = 40
	for _, reuse := range []bool{false, true} {
		var mu sync.Mutex
		var kept, sent [][]byte
		ts := startServer(t, HandlerFunc(func(ctx context.Context, c *ConnInfo, r *Request) Response {
			if m, ok := r.Msg.(*kmsg.ProduceRequest); ok {
				mu.Lock()
				kept = append(kept, m.Topics[0].Partitions[0].Records) // kept on purpose
				mu.Unlock()
			}
			return echoHandler(ctx, c, r)
		}), func(s *Server) {
			if reuse {
				s.ReuseFrameKeys = []int16{0}
			}
		})
		c := dial(t, ts.addr)
		for i := range int32(n) {
			req := produceRequest(1)
			p := kmsg.NewProduceRequestTopicPartition()
			p.Records = bytes.Repeat([]byte{byte(i)}, 3*minPooledFrame/2)
			req.Topics[0].Partitions = append(req.Topics[0].Partitions, p)
			sent = append(sent, p.Records)
			c.roundTrip(req, 9, i)
		}
		c.send(metadataRequest("after"), 12, n)
		c.read(metadataRequest(), 12, n)
		mu.Lock()
		changed := 0
		for i := range kept {
			if !bytes.Equal(kept[i], sent[i]) {
				changed++
			}
		}
		mu.Unlock()
		// sync.Pool may drop a buffer (always a few under the race detector), so
		// not every frame is reused, but out of n some are.
		if reuse && changed == 0 {
			t.Errorf("with Produce in ReuseFrameKeys, none of %d frames was reused", n)
		}
		if !reuse && changed != 0 {
			t.Errorf("without ReuseFrameKeys, %d of %d kept requests changed", changed, n)
		}
	}
}

// BenchmarkReadProduceFrame reads one Produce frame of about 1 MiB (a franz-go
// producer's full batch), of four such batches (a franz-go producer over four
// partitions), or of one 1 KiB record, from a connection's buffered
// reader, into a new buffer (fresh) or a pooled one given back after use
// (pooled, ReuseFrameKeys).
//
//	go test -run '^$' -bench BenchmarkReadProduceFrame -benchmem ./internal/protocol/
//
// Loaded 2-core machine (load average 14-25), ns/op meaningful only beside
// each other within one invocation (B/op below 300 is the pool refilled after a
// garbage collection):
//
//	                       fresh                               pooled
//	with the size prefix   1.41-3.24 ms/op  1,007,624 B/op     0.20-0.24 ms/op  4-213 B/op
//	  on the heap          2 allocs/op                         1 allocs/op
//	read in place          2.21-2.47 ms/op  1,007,616 B/op     0.61-1.05 ms/op  0-290 B/op
//	                       1 allocs/op                         0 allocs/op
//
// The 1KiB case (a Produce of one 1 KiB record, as at linger 0) was pooled
// only since the smallest class went from 16 KiB to 1 KiB; before, "pooled"
// read it as "fresh" does. One run, load average about 25:
//
//	1KiB   fresh 1,416 ns/op  1,152 B/op  1 allocs/op   pooled 145 ns/op  1 B/op  0 allocs/op
//
// The 4MiB case was pooled only since the classes went past 1 MiB (session
// 29); before, "pooled" grew a fresh buffer as "fresh" does. Three
// alternating runs of `-test.benchtime 200x`, quiet (load 0.38):
//
//	4MiB   pooled before 0.81-1.10 ms/op  7,151,616 B/op  3 allocs/op
//	       pooled now    0.150-0.153 ms/op   26,220 B/op  0 allocs/op
func BenchmarkReadProduceFrame(b *testing.B) {
	for _, records := range []struct {
		name       string
		size       int
		partitions int
	}{{"1MiB", 1_000_000, 1}, {"1KiB", 1100, 1}, {"4MiB", 1_000_000, 4}} { // 1KiB: one 1 KiB record's batch (linger 0); 4MiB: franz-go over four partitions
		req := produceRequest(-1)
		for range records.partitions {
			p := kmsg.NewProduceRequestTopicPartition()
			p.Records = bytes.Repeat([]byte{1}, records.size)
			req.Topics[0].Partitions = append(req.Topics[0].Partitions, p)
		}
		frame := frameOf(req, 9, 1, kmsg.StringPtr("bench"))
		b.Run(records.name, func(b *testing.B) { benchmarkReadFrame(b, frame) })
	}
}

func benchmarkReadFrame(b *testing.B, frame []byte) {
	for _, bm := range []struct {
		name  string
		reuse []bool
	}{{"fresh", nil}, {"pooled", []bool{true}}} {
		b.Run(bm.name, func(b *testing.B) {
			c := &conn{srv: &Server{reuseFrame: bm.reuse}}
			rd := bytes.NewReader(frame)
			br := bufio.NewReaderSize(rd, readBufferSize)
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				rd.Reset(frame)
				br.Reset(rd)
				size, err := readFrameSize(br, DefaultMaxRequestBytes)
				if err != nil {
					b.Fatal(err)
				}
				body, pooled, err := c.readFrameBody(br, size)
				if err != nil || len(body) != int(size) {
					b.Fatal(len(body), err)
				}
				putFrame(pooled)
			}
		})
	}
}
