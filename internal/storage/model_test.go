package storage

import (
	"bytes"
	"context"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/vfs"
)

// TestLogMatchesModel drives a log with random appends (each waited for), truncations,
// DeleteRecords, retention, clean restarts and power cuts, and after every step
// compares it with a model: the list of batches and the log start offset. Every
// operation in the sequence is durable when it returns, so a power cut must lose
// nothing.
func TestLogMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		fsys := vfs.NewMem()
		clk := newClock()
		cfg := Config{
			SegmentBytes:       rapid.SampledFrom([]int64{2048, 4096, 1 << 20}).Draw(rt, "segmentBytes"),
			IndexIntervalBytes: rapid.SampledFrom([]int{IndexEveryBatch, 1, 200, 4096}).Draw(rt, "indexInterval"),
			IndexMaxBytes:      testIndexBytes,
			RetentionAge:       time.Hour,
			Now:                clk.Now,
		}
		l, err := Open(fsys, testDir, cfg)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { l.Close() }()

		var model [][]byte // batches in offset order, from the one holding start
		start, end := int64(0), int64(0)
		// dropBelow removes model batches wholly below off.
		dropBelow := func(off int64) {
			for len(model) > 0 {
				if h, _ := batch.ParseHeader(model[0]); h.NextOffset() > off {
					return
				}
				model = model[1:]
			}
		}
		reopen := func(f vfs.FS) {
			var err error
			if l, err = Open(f, testDir, cfg); err != nil {
				rt.Fatal(err)
			}
		}
		check := func() {
			if l.LogEndOffset() != end || l.LogStartOffset() != start {
				rt.Fatalf("log [%d, %d), model [%d, %d)", l.LogStartOffset(), l.LogEndOffset(), start, end)
			}
			got := readAll(rt, l)
			if len(got) != len(model) {
				rt.Fatalf("log has %d batches, model %d", len(got), len(model))
			}
			for i := range got {
				if !bytes.Equal(got[i], model[i]) {
					rt.Fatalf("batch %d differs", i)
				}
			}
		}

		rt.Repeat(map[string]func(*rapid.T){
			"append": func(rt *rapid.T) {
				n := rapid.IntRange(1, 5).Draw(rt, "records")
				b := mkBatch(n, rapid.IntRange(1, 300).Draw(rt, "size"), clk.Now().UnixMilli())
				info, err := l.Append(b, 0)
				if err != nil {
					rt.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := l.WaitDurable(ctx, info.LastOffset); err != nil {
					rt.Fatal(err)
				}
				model = append(model, b)
				end = info.LastOffset + 1
			},
			"truncate": func(rt *rapid.T) {
				off := rapid.Int64Range(start, end).Draw(rt, "offset")
				first := segmentBases(l)[0]
				if err := l.Truncate(off); err != nil {
					rt.Fatal(err)
				}
				switch {
				case off >= end:
				case off <= first:
					// Everything goes; the log restarts at off.
					model, start, end = nil, off, off
				default:
					// The batch holding off goes too; the start may move down to its base.
					for len(model) > 0 {
						h, _ := batch.ParseHeader(model[len(model)-1])
						if h.LastOffset() < off {
							break
						}
						model, end = model[:len(model)-1], h.BaseOffset
					}
					start = min(start, end)
				}
			},
			"deleteRecords": func(rt *rapid.T) {
				off := rapid.Int64Range(start, end).Draw(rt, "offset")
				if err := l.DeleteRecords(off); err != nil {
					rt.Fatal(err)
				}
				start = off
				dropBelow(off)
			},
			"retention": func(rt *rapid.T) {
				clk.Advance(time.Duration(rapid.IntRange(0, 90).Draw(rt, "minutes")) * time.Minute)
				if _, err := l.EnforceRetention(l.LogEndOffset()); err != nil {
					rt.Fatal(err)
				}
				start = l.LogStartOffset()
				dropBelow(start)
			},
			"restart": func(rt *rapid.T) {
				if err := l.Close(); err != nil {
					rt.Fatal(err)
				}
				reopen(fsys)
			},
			"powerCut": func(rt *rapid.T) {
				crashed := fsys.CrashClone(vfs.WithTornWrites(rapid.Uint64().Draw(rt, "seed")))
				if err := l.Close(); err != nil {
					rt.Fatal(err)
				}
				fsys = crashed
				reopen(fsys)
			},
			"": func(rt *rapid.T) { check() },
		})
	})
}
