package storage

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/strata-stream/strata/internal/vfs"
)

// compactFixture builds a cleanly closed log that a pass will change: a clean
// section from an earlier pass (with a tombstone), then dirty segments with
// overwrites, a snappy batch and another tombstone. It returns the filesystem and
// the records the log holds.
func compactFixture(t *testing.T, clk *clock, cfg Config) (*vfs.MemFS, []kv) {
	t.Helper()
	fsys := vfs.NewMem()
	l := openLog(t, fsys, cfg)
	writeKeyed(t, l, clk, 30, 0)
	appendKV(t, l, clk, 0, tombstone("k3"))
	seal(t, l, clk)
	mustCompact(t, l, l.LogEndOffset(), compactOpts())
	writeKeyed(t, l, clk, 30, 2)
	appendKV(t, l, clk, 0, tombstone("k5"), keyless("x"))
	seal(t, l, clk)
	recs := logRecords(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return fsys, recs
}

// compactOutcome opens the log in fsys and checks that it holds either the old or
// the new records, never a mix, and that a further pass (same clock) converges on
// the new ones.
func compactOutcome(t *testing.T, fsys vfs.FS, cfg Config, old, cleaned []kv, what string) {
	t.Helper()
	l, err := Open(fsys, testDir, cfg)
	if err != nil {
		t.Fatalf("%s: Open: %v", what, err)
	}
	defer l.Close()
	got := logRecords(t, l)
	if !slices.EqualFunc(got, old, kv.equal) && !slices.EqualFunc(got, cleaned, kv.equal) {
		t.Fatalf("%s: the log holds neither the old nor the cleaned records:\n got %v\n old %v\n new %v", what, short(got), short(old), short(cleaned))
	}
	mustCompact(t, l, l.LogEndOffset(), compactOpts())
	if got := logRecords(t, l); !slices.EqualFunc(got, cleaned, kv.equal) {
		t.Fatalf("%s: a further pass gives\n %v\nwant %v", what, short(got), short(cleaned))
	}
	names, _ := fsys.List(testDir)
	for _, n := range names {
		if strings.HasSuffix(n, cleanedSuffix) || n == swapManifestName {
			t.Fatalf("%s: %s left behind", what, n)
		}
	}
}

// countingFS wraps fsys and calls hook with the number of each operation made
// while armed.
func countingFS(fsys vfs.FS, armed *atomic.Bool, hook func(n int64, op vfs.Op) error) vfs.FS {
	var count atomic.Int64
	return vfs.NewErrorFS(fsys, vfs.InjectorFunc(func(op vfs.Op) error {
		if !armed.Load() {
			return nil
		}
		return hook(count.Add(1)-1, op)
	}))
}

// TestCompactCrashAtEveryStep cuts the power before each filesystem operation of
// a pass (unsynced writes torn at random) and checks that the reopened log holds
// the old records or the cleaned ones.
func TestCompactCrashAtEveryStep(t *testing.T) {
	clk := newClock()
	cfg := compactCfg(clk)
	cfg.IndexMaxBytes = testIndexBytes
	base, old := compactFixture(t, clk, cfg)
	ref := openLog(t, base.CrashClone(), cfg)
	mustCompact(t, ref, ref.LogEndOffset(), compactOpts())
	cleaned := logRecords(t, ref)
	if slices.EqualFunc(old, cleaned, kv.equal) {
		t.Fatal("the fixture does not change")
	}

	steps := crashAtEachLogOp(t, base, cfg, func(l *Log) error {
		_, err := l.Compact(l.LogEndOffset(), compactOpts())
		return err
	}, func(img *vfs.MemFS, what string) {
		compactOutcome(t, img, cfg, old, cleaned, what)
	})
	if steps < 10 {
		t.Fatalf("a pass made only %d operations", steps)
	}
	t.Logf("crashed at each of %d operations", steps)
}

// TestCompactFailsAtEveryStep fails each filesystem operation of a pass in turn. A
// failure before the commit point leaves the log working with its old records; one
// after it makes the log fail-stop, and reopening (with or without a power cut)
// finishes the swap.
func TestCompactFailsAtEveryStep(t *testing.T) {
	clk := newClock()
	cfg := compactCfg(clk)
	cfg.IndexMaxBytes = testIndexBytes
	base, old := compactFixture(t, clk, cfg)
	ref := openLog(t, base.CrashClone(), cfg)
	mustCompact(t, ref, ref.LogEndOffset(), compactOpts())
	cleaned := logRecords(t, ref)

	// Count the operations of an undisturbed pass.
	var total int64
	{
		var armed atomic.Bool
		fsys := countingFS(base.CrashClone(), &armed, func(i int64, _ vfs.Op) error { total = i + 1; return nil })
		l, err := Open(fsys, testDir, cfg)
		if err != nil {
			t.Fatal(err)
		}
		armed.Store(true)
		mustCompact(t, l, l.LogEndOffset(), compactOpts())
		armed.Store(false)
		l.Close()
	}

	var failStops, recovered int
	for n := range total {
		mem := base.CrashClone()
		var armed atomic.Bool
		fsys := countingFS(mem, &armed, func(i int64, op vfs.Op) error {
			if i == n {
				return vfs.ErrInjected
			}
			return nil
		})
		l, err := Open(fsys, testDir, cfg)
		if err != nil {
			t.Fatal(err)
		}
		armed.Store(true)
		_, err = l.Compact(l.LogEndOffset(), compactOpts())
		armed.Store(false)
		if err == nil {
			// A best-effort operation failed (removing a file a pass leaves).
			l.Close()
			compactOutcome(t, mem, cfg, cleaned, cleaned, fmt.Sprintf("failing op %d silently", n))
			continue
		}
		what := fmt.Sprintf("failing op %d: %v", n, err)
		if errors.Is(l.writable(), ErrLogFailed) {
			failStops++
			crashed := mem.CrashClone()
			l.Close()
			compactOutcome(t, mem, cfg, old, cleaned, what+", reopened")
			compactOutcome(t, crashed, cfg, old, cleaned, what+", power cut")
			continue
		}
		recovered++
		sameRecords(t, logRecords(t, l), old)
		mustCompact(t, l, l.LogEndOffset(), compactOpts())
		sameRecords(t, logRecords(t, l), cleaned)
		l.Close()
	}
	if failStops == 0 || recovered == 0 {
		t.Fatalf("%d fail-stops, %d recoverable failures", failStops, recovered)
	}
	t.Logf("%d recoverable failures, %d fail-stops", recovered, failStops)
}

func TestDamagedSwapManifestFailsOpen(t *testing.T) {
	clk := newClock()
	cfg := compactCfg(clk)
	fsys, _ := compactFixture(t, clk, cfg)
	f, err := fsys.Create(filepath.Join(testDir, swapManifestName))
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("not a manifest"))
	f.Close()
	if _, err := Open(fsys, testDir, cfg); !errors.Is(err, ErrCorruptSideFile) {
		t.Fatalf("Open with a damaged manifest: %v", err)
	}
}

// TestCompactRacesWithMutations truncates or deletes records while a pass is
// writing its cleaned segments: a truncation abandons the pass, a deletion of
// segments drops their groups, and the log stays consistent.
func TestCompactRacesWithMutations(t *testing.T) {
	clk := newClock()
	cfg := compactCfg(clk)
	cfg.IndexMaxBytes = testIndexBytes
	base, old := compactFixture(t, clk, cfg)
	for _, tt := range []struct {
		name    string
		mutate  func(l *Log) error
		cleaned bool
	}{
		{"truncate", func(l *Log) error { return l.Truncate(old[len(old)/2].offset) }, false},
		{"delete records", func(l *Log) error { return l.DeleteRecords(segmentBases(l)[1]) }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mem := base.CrashClone()
			var armed atomic.Bool
			var l *Log
			var mutateErr error
			fsys := countingFS(mem, &armed, func(_ int64, op vfs.Op) error {
				if op.Kind == vfs.OpCreate && strings.HasSuffix(op.Path, cleanedSuffix) && armed.CompareAndSwap(true, false) {
					mutateErr = tt.mutate(l)
				}
				return nil
			})
			var err error
			if l, err = Open(fsys, testDir, cfg); err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			armed.Store(true)
			st, err := l.Compact(l.LogEndOffset(), compactOpts())
			if err != nil || mutateErr != nil || st.Cleaned != tt.cleaned {
				t.Fatalf("Compact: %+v, %v; mutation: %v", st, err, mutateErr)
			}
			if armed.Load() {
				t.Fatal("the mutation did not run")
			}
			got := logRecords(t, l)
			var want []kv
			for _, r := range old {
				if r.offset >= l.LogStartOffset() && r.offset < l.LogEndOffset() {
					want = append(want, r)
				}
			}
			if tt.cleaned {
				want = compactedOnce(want, st.EndOffset)
			}
			sameRecords(t, got, want)
			// The log still works: a later pass cleans it, and it reopens as it was.
			mustCompact(t, l, l.LogEndOffset(), compactOpts())
			final := logRecords(t, l)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			compactOutcome(t, mem, cfg, final, final, "reopen")
		})
	}
}

// TestCompactSwapRecoveryIsRestartable cuts the power just after a swap commits
// (the manifest is durable, no old segment renamed yet), then again before each
// filesystem operation of the Open that finishes the swap: every later Open must
// still finish it.
func TestCompactSwapRecoveryIsRestartable(t *testing.T) {
	clk := newClock()
	cfg := compactCfg(clk)
	cfg.IndexMaxBytes = testIndexBytes
	base, _ := compactFixture(t, clk, cfg)
	ref := openLog(t, base.CrashClone(), cfg)
	mustCompact(t, ref, ref.LogEndOffset(), compactOpts())
	cleaned := logRecords(t, ref)

	// The first rename of a .log is step 4b's, right after the commit: take the
	// power-cut image there and fail the rename.
	mem := base.CrashClone()
	var armed atomic.Bool
	var image *vfs.MemFS
	fsys := countingFS(mem, &armed, func(_ int64, op vfs.Op) error {
		if image == nil && op.Kind == vfs.OpRename && strings.HasSuffix(op.Path, logSuffix) {
			image = mem.CrashClone()
			return vfs.ErrInjected
		}
		return nil
	})
	l, err := Open(fsys, testDir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	if _, err := l.Compact(l.LogEndOffset(), compactOpts()); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("Compact: %v", err)
	}
	armed.Store(false)
	l.Close()
	if image == nil {
		t.Fatal("the pass renamed no segment")
	}
	if _, err := image.Stat(filepath.Join(testDir, swapManifestName)); err != nil {
		t.Fatalf("manifest not durable at the commit point: %v", err)
	}

	steps := crashAtEachOpen(t, image, cfg, func(l *Log) {
		sameRecords(t, logRecords(t, l), cleaned)
	}, func(img *vfs.MemFS, what string) {
		compactOutcome(t, img, cfg, cleaned, cleaned, what+" of the recovering Open")
	})
	if steps < 5 {
		t.Fatalf("recovery made only %d operations", steps)
	}
	t.Logf("crashed at each of %d operations of the recovering Open and Close", steps)
}
