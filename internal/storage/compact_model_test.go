package storage

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/vfs"
	"github.com/strata-stream/strata/internal/wait"
)

// TestCompactedLogMatchesModel drives a compacted log with random keyed appends
// (tombstones, keyless records, compressed batches), rolls, compaction passes at random
// high-water marks and times, truncations above the high-water mark, DeleteRecords,
// clean restarts and power cuts, and after every step checks what it serves
// against the list of every record appended:
//
//  1. every record served is the one appended at its offset;
//  2. every record at or above the first dirty offset is served;
//  3. below it, no keyless record and no record whose key has a later record
//     below it is served;
//  4. the latest record of each key is served, unless it is a tombstone below the
//     first dirty offset that has been clean for longer than DeleteRetention (a
//     tombstone clean for less is always served);
//  5. a Read at any offset returns the batch holding the first record served at
//     or after it.
func TestCompactedLogMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		fsys := vfs.NewMem()
		clk := newClock()
		cfg := Config{
			SegmentBytes:       rapid.SampledFrom([]int64{2048, 4096}).Draw(rt, "segmentBytes"),
			IndexIntervalBytes: rapid.SampledFrom([]int{1, 200}).Draw(rt, "indexInterval"),
			IndexMaxBytes:      testIndexBytes,
			SegmentAge:         time.Minute,
			RetentionAge:       -1,
			Now:                clk.Now,
		}
		opts := CompactOptions{DeleteRetention: time.Hour, MinCleanableDirtyRatio: rapid.SampledFrom([]float64{0, 0.3}).Draw(rt, "ratio")}
		l, err := Open(fsys, testDir, cfg)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { l.Close() }()

		var all []kv // every record appended and not truncated, in offset order
		var hwm int64
		type pass struct{ end, atMs int64 }
		var passes []pass // passes that moved the first dirty offset
		cleanedAt := func(offset int64) int64 {
			for _, p := range passes {
				if offset < p.end {
					return p.atMs
				}
			}
			rt.Fatalf("offset %d below the first dirty offset was never cleaned", offset)
			return 0
		}
		reopen := func(f vfs.FS) {
			if l, err = Open(f, testDir, cfg); err != nil {
				rt.Fatal(err)
			}
		}
		check := func() {
			start, end, dirty := l.LogStartOffset(), l.LogEndOffset(), l.FirstDirtyOffset()
			// Records below the log start in its first batch are not served.
			got := slices.DeleteFunc(logRecords(rt, l), func(r kv) bool { return r.offset < start })
			live := slices.DeleteFunc(slices.Clone(all), func(r kv) bool { return r.offset < start })
			served := map[int64]kv{}
			for _, r := range got {
				i, ok := slices.BinarySearchFunc(live, r.offset, func(a kv, o int64) int { return int(a.offset - o) })
				if !ok || !live[i].equal(r) {
					rt.Fatalf("served %v, which was not appended", r)
				}
				served[r.offset] = r
			}
			latest := map[string]int64{}
			for _, r := range live {
				if r.key != nil {
					latest[string(r.key)] = r.offset
				}
			}
			latestBelow := map[string]int64{}
			for _, r := range live {
				if r.key != nil && r.offset < dirty {
					latestBelow[string(r.key)] = r.offset
				}
			}
			for _, r := range live {
				_, ok := served[r.offset]
				switch {
				case r.offset >= dirty:
					if !ok {
						rt.Fatalf("dirty record %v (first dirty %d) not served", r, dirty)
					}
				case r.key == nil:
					if ok {
						rt.Fatalf("keyless %v served below the first dirty offset %d", r, dirty)
					}
				case latestBelow[string(r.key)] != r.offset:
					if ok {
						rt.Fatalf("superseded %v served below the first dirty offset %d", r, dirty)
					}
				case latest[string(r.key)] == r.offset && r.isTombstone():
					expired := clk.Now().UnixMilli()-cleanedAt(r.offset) > opts.DeleteRetention.Milliseconds()
					if !ok && !expired {
						rt.Fatalf("tombstone %v gone before its retention", r)
					}
				case latest[string(r.key)] == r.offset:
					if !ok {
						rt.Fatalf("latest record %v not served", r)
					}
				}
			}
			if end > start {
				o := rapid.Int64Range(start, end-1).Draw(rt, "readAt")
				c, err := l.Read(o, 1, end)
				if err != nil {
					rt.Fatalf("Read(%d): %v", o, err)
				}
				b, _ := c.Bytes()
				c.Release()
				var next *kv
				for i := range got {
					if got[i].offset >= o {
						next = &got[i]
						break
					}
				}
				if len(b) > 0 {
					h, err := batch.ValidateStored(b)
					if err != nil || h.LastOffset() < o || (next != nil && next.offset < h.BaseOffset) {
						rt.Fatalf("Read(%d) gave batch [%d, %d] (%v), next record %v", o, h.BaseOffset, h.LastOffset(), err, next)
					}
				} else if next != nil {
					rt.Fatalf("Read(%d) gave nothing, next record %v", o, *next)
				}
			}
		}

		rt.Repeat(map[string]func(*rapid.T){
			"append": func(rt *rapid.T) {
				n := rapid.IntRange(1, 4).Draw(rt, "records")
				recs := make([]kv, n)
				for i := range recs {
					switch rapid.IntRange(0, 19).Draw(rt, "kind") {
					case 0:
						recs[i] = keyless("nokey")
					case 1, 2, 3:
						recs[i] = tombstone(fmt.Sprintf("k%d", rapid.IntRange(0, 5).Draw(rt, "key")))
					default:
						recs[i] = put(fmt.Sprintf("k%d", rapid.IntRange(0, 5).Draw(rt, "key")), fmt.Sprint(rapid.IntRange(0, 1<<20).Draw(rt, "value")))
					}
				}
				// Snappy stands for every codec (TestCompactCompressedBatches covers
				// all four): the others' decoders are slow under the race detector.
				codec := rapid.SampledFrom([]int8{0, 2}).Draw(rt, "codec")
				out := appendKV(rt, l, clk, codec, recs...)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := l.WaitDurable(ctx, out[len(out)-1].offset); err != nil {
					rt.Fatal(err)
				}
				all = append(all, out...)
			},
			"roll": func(rt *rapid.T) {
				out := seal(rt, l, clk)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := l.WaitDurable(ctx, out[0].offset); err != nil {
					rt.Fatal(err)
				}
				all = append(all, out...)
			},
			"compact": func(rt *rapid.T) {
				clk.Advance(time.Duration(rapid.IntRange(0, 40).Draw(rt, "minutes")) * time.Minute)
				hwm = rapid.Int64Range(max(hwm, l.LogStartOffset()), l.LogEndOffset()).Draw(rt, "hwm")
				before := l.FirstDirtyOffset()
				st, err := l.Compact(hwm, opts)
				if err != nil {
					rt.Fatal(err)
				}
				if st.Cleaned && st.EndOffset > hwm {
					rt.Fatalf("cleaned up to %d above the high-water mark %d", st.EndOffset, hwm)
				}
				if after := l.FirstDirtyOffset(); after > before {
					passes = append(passes, pass{after, clk.Now().UnixMilli()})
				}
			},
			"truncate": func(rt *rapid.T) {
				off := rapid.Int64Range(max(hwm, l.LogStartOffset()), l.LogEndOffset()).Draw(rt, "offset")
				if err := l.Truncate(off); err != nil {
					rt.Fatal(err)
				}
				end := l.LogEndOffset()
				all = slices.DeleteFunc(all, func(r kv) bool { return r.offset >= end })
				hwm = min(hwm, end)
			},
			"deleteRecords": func(rt *rapid.T) {
				off := rapid.Int64Range(l.LogStartOffset(), max(hwm, l.LogStartOffset())).Draw(rt, "offset")
				if err := l.DeleteRecords(off); err != nil {
					rt.Fatal(err)
				}
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

// TestCompactWhileReadingAndAppending runs an appender, readers and a compaction
// loop at once. With -race it checks the locking; every read must see whole,
// valid batches whose records are the ones appended at their offsets, in order,
// and after the last pass every key's latest record must be there.
func TestCompactWhileReadingAndAppending(t *testing.T) {
	clk := newClock()
	cfg := compactCfg(clk)
	cfg.SegmentBytes = 2048
	l := openLog(t, vfs.NewMem(), cfg)
	var mu sync.Mutex
	appended := map[int64]kv{}
	var stop atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	run := func(f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if err := f(); err != nil {
					errc <- err
					stop.Store(true)
					return
				}
			}
		}()
	}
	var n atomic.Int64
	var visible atomic.Int64 // readers stop here: records below it are in appended
	run(func() error {
		i := n.Add(1)
		recs := []kv{put(fmt.Sprintf("k%d", i%13), fmt.Sprint(i)), put(fmt.Sprintf("k%d", i%5), fmt.Sprint(i))}
		info, err := l.Append(kvBatch(clk, int8(i%2)*2, recs), 0)
		if err != nil {
			return err
		}
		mu.Lock()
		for j, r := range recs {
			r.offset = info.FirstOffset + int64(j)
			appended[r.offset] = r
		}
		mu.Unlock()
		visible.Store(info.LastOffset + 1)
		clk.Advance(time.Second)
		return nil
	})
	for range 2 {
		run(func() error {
			last := int64(-1)
			for off, end := l.LogStartOffset(), visible.Load(); off < end; {
				c, err := l.Read(off, 1000, end)
				if err != nil {
					return err
				}
				b, err := c.Bytes()
				c.Release()
				if err != nil {
					return err
				}
				if len(b) == 0 {
					break
				}
				for it := batch.NewStoredIter(b); it.Next(); {
					err := batch.Records(it.Batch(), func(h batch.Header, r batch.Record) error {
						o := h.BaseOffset + int64(r.OffsetDelta)
						mu.Lock()
						want, ok := appended[o]
						mu.Unlock()
						if !ok || o <= last || string(want.key) != string(r.Key) || string(want.value) != string(r.Value) {
							return fmt.Errorf("read %d:%s=%s after %d, appended %v", o, r.Key, r.Value, last, want)
						}
						last = o
						return nil
					})
					if err != nil {
						return err
					}
				}
				off = c.NextOffset
			}
			return nil
		})
	}
	var passes atomic.Int64
	run(func() error {
		st, err := l.Compact(l.LogEndOffset(), compactOpts())
		if st.Cleaned {
			passes.Add(1)
		}
		return err
	})
	wait.For(t, "compaction passes", func() bool { return passes.Load() >= 15 || stop.Load() })
	stop.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}

	mustCompact(t, l, l.LogEndOffset(), compactOpts())
	latest := map[string]kv{}
	for _, r := range appended {
		if cur, ok := latest[string(r.key)]; !ok || r.offset > cur.offset {
			latest[string(r.key)] = r
		}
	}
	got := map[int64]kv{}
	for _, r := range logRecords(t, l) {
		got[r.offset] = r
	}
	for k, r := range latest {
		if g, ok := got[r.offset]; !ok || !g.equal(r) {
			t.Fatalf("key %s: latest record %v not served", k, r)
		}
	}
	if s := l.Stats(); s.Compactions < 15 {
		t.Fatalf("%d passes", s.Compactions)
	}
}
