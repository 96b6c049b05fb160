package testcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// BinaryEnv names an environment variable holding the path of a prebuilt strata
// binary; when set, Binary uses it instead of building one.
const BinaryEnv = "STRATA_TEST_BINARY"

// built is the binary this test process built, shared by every test in it.
var built struct {
	once sync.Once
	dir  string // temporary directory holding it; removed by Main
	path string
	err  error
}

// Binary returns the path of a strata binary. The first call in a test process
// builds ./cmd/strata of the enclosing module with `go build` (without the race
// detector, whatever the test binary was built with); later calls reuse it.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(BinaryEnv); p != "" {
		return p
	}
	built.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			built.err = err
			return
		}
		built.dir, err = os.MkdirTemp("", "strata-testcluster-bin-")
		if err != nil {
			built.err = err
			return
		}
		built.path = filepath.Join(built.dir, "strata")
		cmd := exec.Command("go", "build", "-o", built.path, "./cmd/strata")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build ./cmd/strata: %w\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatalf("testcluster: %v", built.err)
	}
	return built.path
}

// Main runs a test package's tests and then removes the binary Binary built.
// Call it from TestMain: func TestMain(m *testing.M) { testcluster.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// moduleRoot is the nearest directory at or above the working directory (a
// test's package directory) that holds a go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod at or above the working directory")
		}
		dir = parent
	}
}
