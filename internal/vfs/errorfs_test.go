package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// newErrorMem returns an ErrorFS over a MemFS holding empty files /d/a.log and
// /d/b.idx, both open for writing, and the MemFS.
func newErrorMem(t *testing.T, inj Injector) (*ErrorFS, *MemFS, File, File) {
	t.Helper()
	m := NewMem()
	durableDir(t, m)
	writeFile(t, m, "/d/a.log", "")
	writeFile(t, m, "/d/b.idx", "")
	syncDir(t, m, "/d")
	e := NewErrorFS(m, inj)
	open := func(name string) File {
		f, err := e.OpenReadWrite(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	return e, m, open("/d/a.log"), open("/d/b.idx")
}

func TestRule(t *testing.T) {
	type step struct {
		op   string // "write a", "sync b", ...
		fail bool
	}
	cases := []struct {
		name  string
		rule  *Rule
		steps []step
	}{
		{
			name: "third write fails once",
			rule: FailOn(OpWrite).After(2).Times(1),
			steps: []step{
				{"write a", false}, {"write b", false}, {"write a", true}, {"write a", false}, {"sync a", false},
			},
		},
		{
			name: "next sync fails",
			rule: FailOn(OpSync).Times(1),
			steps: []step{
				{"write a", false}, {"sync a", true}, {"sync a", false},
			},
		},
		{
			name: "every sync fails",
			rule: FailOn(OpSync),
			steps: []step{
				{"sync a", true}, {"sync b", true}, {"sync a", true}, {"write a", false},
			},
		},
		{
			name: "base-name glob",
			rule: FailOn(OpWrite | OpSync).Path("*.log"),
			steps: []step{
				{"write b", false}, {"write a", true}, {"sync b", false}, {"sync a", true},
			},
		},
		{
			name: "full-path glob",
			rule: FailOn(OpRead | OpSize | OpTruncate).Path("/d/*.idx"),
			steps: []step{
				{"write a", false}, {"readat b", true}, {"size b", true}, {"truncate b", true}, {"size a", false},
			},
		},
		{
			name: "reads fail",
			rule: FailOn(OpRead),
			steps: []step{
				{"write a", false}, {"read a", true}, {"readat a", true}, {"size a", false},
			},
		},
		{
			name: "rename matches the new name",
			rule: FailOn(OpRename).Path("*.tmp"),
			steps: []step{
				{"rename a.log x.tmp", true}, {"rename a.log c.log", false},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, _, a, b := newErrorMem(t, c.rule)
			files := map[string]File{"a": a, "b": b}
			fired := 0
			for i, s := range c.steps {
				var err error
				words := append(strings.Fields(s.op), "", "")
				verb, file, extra := words[0], words[1], words[2]
				f := files[file]
				switch verb {
				case "write":
					_, err = f.Write([]byte("x"))
				case "read":
					_, err = f.Read(make([]byte, 1))
				case "readat":
					_, err = f.ReadAt(make([]byte, 1), 0)
				case "sync":
					err = f.Sync()
				case "size":
					_, err = f.Size()
				case "truncate":
					err = f.Truncate(0)
				case "rename":
					err = e.Rename("/d/"+file, "/d/"+extra)
				default:
					t.Fatalf("bad step %q", s.op)
				}
				if s.fail {
					fired++
					var pe *fs.PathError
					if !errors.Is(err, ErrInjected) || !errors.As(err, &pe) {
						t.Fatalf("step %d %q: err = %v, want an injected *fs.PathError", i, s.op, err)
					}
				} else if err != nil {
					t.Fatalf("step %d %q: unexpected error %v", i, s.op, err)
				}
			}
			if got := c.rule.Fired(); got != int64(fired) {
				t.Fatalf("Fired() = %d, want %d", got, fired)
			}
		})
	}
}

func TestRuleFailedWriteWritesNothing(t *testing.T) {
	_, m, a, _ := newErrorMem(t, FailOn(OpWrite).After(1).Times(1))
	write(t, a, "one")
	if _, err := a.Write([]byte("two")); !errors.Is(err, ErrInjected) {
		t.Fatalf("second write: %v", err)
	}
	if _, err := a.WriteAt([]byte("three"), 3); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, m, "/d/a.log"); got != "onethree" {
		t.Fatalf("contents = %q", got)
	}
}

func TestRuleToggle(t *testing.T) {
	rule := FailOn(OpWrite).Times(1).WithError(syscall.EIO)
	rule.Disable()
	_, _, a, _ := newErrorMem(t, rule)
	for range 3 {
		write(t, a, "x") // not counted while disabled
	}
	rule.Enable()
	if _, err := a.Write([]byte("x")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("first write after Enable: %v, want EIO", err)
	}
	write(t, a, "x")
	rule.Reset()
	if _, err := a.Write([]byte("x")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("first write after Reset: %v, want EIO", err)
	}
	if rule.Fired() != 1 {
		t.Fatalf("Fired() = %d after Reset and one failure", rule.Fired())
	}
}

func TestRuleConcurrent(t *testing.T) {
	rule := FailOn(OpWrite).After(10).Times(5)
	e, _, _, _ := newErrorMem(t, rule)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures int
	)
	for g := range 8 {
		wg.Go(func() {
			f, err := e.Create(path.Join("/d", string(rune('a'+g))))
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			for range 50 {
				if _, err := f.Write([]byte("x")); err != nil {
					mu.Lock()
					failures++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if failures != 5 || rule.Fired() != 5 {
		t.Fatalf("failures = %d, Fired() = %d; want 5", failures, rule.Fired())
	}
}

func TestRuleBadGlob(t *testing.T) {
	e, _, a, _ := newErrorMem(t, FailOn(OpSync).Path("[bad"))
	if err := a.Sync(); !errors.Is(err, path.ErrBadPattern) {
		t.Fatalf("Sync with a bad glob rule: %v, want path.ErrBadPattern", err)
	}
	if _, err := e.Stat("/d/a.log"); err != nil {
		t.Fatalf("an operation of another kind failed: %v", err)
	}
}

func TestDiskFull(t *testing.T) {
	disk := NewDiskFull(10)
	_, m, a, b := newErrorMem(t, disk)
	write(t, a, "123456")
	n, err := b.WriteAt([]byte("abcdef"), 0)
	if n != 4 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("overrunning write = %d, %v; want 4, ENOSPC", n, err)
	}
	if n, err := a.Write([]byte("7")); n != 0 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write on a full disk = %d, %v; want 0, ENOSPC", n, err)
	}
	if got := readFile(t, m, "/d/b.idx"); got != "abcd" {
		t.Fatalf("short write stored %q, want abcd", got)
	}
	if err := a.Sync(); err != nil {
		t.Fatalf("Sync on a full disk: %v", err)
	}

	disk.SetFree(3)
	write(t, a, "789")
	if disk.Free() != 0 {
		t.Fatalf("Free() = %d, want 0", disk.Free())
	}
	disk.Disable()
	write(t, a, "no budget needed")
	disk.Enable()
	if _, err := a.Write([]byte("x")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write after Enable: %v, want ENOSPC", err)
	}
	if got := readFile(t, m, "/d/a.log"); got != "123456789no budget needed" {
		t.Fatalf("contents = %q", got)
	}
}

func TestDiskFullConcurrent(t *testing.T) {
	disk := NewDiskFull(1000)
	e, m, _, _ := newErrorMem(t, disk)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			name := path.Join("/d", string(rune('a'+g)))
			f, err := e.Create(name)
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			for range 100 {
				f.Write([]byte("0123456"))
			}
		})
	}
	wg.Wait()
	total := 0
	for g := range 4 {
		total += len(readFile(t, m, path.Join("/d", string(rune('a'+g)))))
	}
	if total != 1000 {
		t.Fatalf("%d bytes stored, want exactly the 1000-byte budget", total)
	}
}

func TestErrorFSOperations(t *testing.T) {
	rule := FailOn(OpAll &^ (OpWrite | OpSync | OpClose))
	rule.Disable()
	e, m, _, _ := newErrorMem(t, rule)
	rule.Enable()
	_, createErr := e.Create("/d/new")
	_, openErr := e.Open("/d/a.log")
	_, openRWErr := e.OpenReadWrite("/d/new")
	_, listErr := e.List("/d")
	_, statErr := e.Stat("/d")
	for name, err := range map[string]error{
		"Create":        createErr,
		"Open":          openErr,
		"OpenReadWrite": openRWErr,
		"List":          listErr,
		"Stat":          statErr,
		"Remove":        e.Remove("/d/a.log"),
		"RemoveAll":     e.RemoveAll("/d"),
		"Rename":        e.Rename("/d/a.log", "/d/c"),
		"MkdirAll":      e.MkdirAll("/d/sub", 0o755),
		"SyncDir":       e.SyncDir("/d"),
	} {
		if !errors.Is(err, ErrInjected) {
			t.Errorf("%s: %v, want ErrInjected", name, err)
		}
	}
	// None of them reached the inner FS.
	if got := list(t, m, "/d"); len(got) != 2 || got[0] != "a.log" || got[1] != "b.idx" {
		t.Fatalf("inner FS changed: %q", got)
	}
}

func TestErrorFSCloseAlwaysCloses(t *testing.T) {
	_, _, a, _ := newErrorMem(t, FailOn(OpClose))
	if err := a.Close(); !errors.Is(err, ErrInjected) {
		t.Fatalf("Close: %v, want ErrInjected", err)
	}
	if _, err := a.(*errorFile).inner.Write([]byte("x")); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("inner file still open after a failed Close: %v", err)
	}
}

func TestErrorFSHidesOSFile(t *testing.T) {
	f, err := NewErrorFS(Default, nil).Create(t.TempDir() + "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := f.(OSFile); ok {
		t.Fatal("ErrorFS file exposes OSFile, letting sendfile bypass injection")
	}
}

func TestAny(t *testing.T) {
	first := FailOn(OpSync).Times(1).WithError(syscall.EIO)
	second := FailOn(OpSync)
	_, _, a, _ := newErrorMem(t, Any(first, second))
	if err := a.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("first Sync: %v, want EIO from the first rule", err)
	}
	if err := a.Sync(); !errors.Is(err, ErrInjected) {
		t.Fatalf("second Sync: %v, want ErrInjected from the second rule", err)
	}
	if first.Fired() != 1 || second.Fired() != 1 {
		t.Fatalf("Fired = %d, %d; want 1, 1", first.Fired(), second.Fired())
	}
}

// TestErrorFSFailedSyncIsNotDurable combines the two test filesystems: a write
// whose Sync failed is gone after a power cut.
func TestErrorFSFailedSyncIsNotDurable(t *testing.T) {
	rule := FailOn(OpSync).Path("*.log")
	_, m, a, b := newErrorMem(t, rule)
	write(t, a, "lost")
	write(t, b, "kept")
	if err := a.Sync(); err == nil {
		t.Fatal("Sync succeeded")
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	got := snapshot(t, m.CrashClone())
	if got["/d/a.log"] != "" || got["/d/b.idx"] != "kept" {
		t.Fatalf("after crash: %q", got)
	}
}

func TestOpKindString(t *testing.T) {
	for _, c := range []struct {
		k    OpKind
		want string
	}{
		{0, "none"},
		{OpWrite, "write"},
		{OpSync | OpCreate, "create|sync"},
		{OpClose, "close"},
		{OpSyncFS, "syncfs"},
		{OpLink, "link"},
	} {
		if got := c.k.String(); got != c.want {
			t.Errorf("%d.String() = %q, want %q", c.k, got, c.want)
		}
	}
	if OpAll&OpLink == 0 || OpAll&(OpLink<<1) != 0 {
		t.Errorf("OpAll = %b does not cover exactly the kinds", OpAll)
	}
}

func ExampleRule() {
	syncs := FailOn(OpSync).Path("*.log").Times(1)
	disk := NewDiskFull(8)
	efs := NewErrorFS(NewMem(), Any(syncs, disk))

	f, _ := efs.Create("/00000.log")
	fmt.Println(f.Sync())
	fmt.Println(f.Sync())
	n, err := f.Write([]byte("0123456789"))
	fmt.Println(n, errors.Is(err, syscall.ENOSPC))
	// Output:
	// sync /00000.log: vfs: injected error
	// <nil>
	// 8 true
}
