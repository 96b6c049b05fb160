package interop

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/freeport"
	"github.com/strata-stream/strata/internal/wait"
	"github.com/strata-stream/strata/interop/kafkatools"
)

// A walkthrough is the "## Walkthrough" section of a page of docs/: its sh
// blocks, run in order as one bash script (set -euo pipefail) in an empty
// directory, with the strata binary and Kafka 4.4's tools on the PATH, so the
// page cannot drift from what works. The servers it starts in the background
// are stopped with its process group.
type walkthrough struct {
	page string // the page, relative to docs/
	// ports are the port numbers the page names (as ":9092"); each is replaced
	// by one free on every one of hosts.
	ports, hosts []string
	// tools the script needs besides strata and Kafka's; it skips without them.
	tools   []string
	timeout time.Duration
}

// run runs the walkthrough and fails t, with the script's output and the end
// of each *.log file it left, when any command fails.
func (w walkthrough) run(t *testing.T) {
	kafkatools.Require(t)
	for _, tool := range append([]string{"bash"}, w.tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not on PATH", tool)
		}
	}
	script := walkthroughScript(t, filepath.Join("..", "docs", w.page))
	ports, err := freeport.Ports(len(w.ports), w.hosts...)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range w.ports {
		script = strings.ReplaceAll(script, ":"+p, fmt.Sprintf(":%d", ports[i]))
	}
	bin := t.TempDir()
	if err := kafkatools.WriteScripts(bin); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(strataBinary(t), filepath.Join(bin, "strata")); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-x", "-c", script)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "PS4=+ [walkthrough] ")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The servers run in the background of the script's process group: stop the
	// whole group, also when the script fails or times out.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err = cmd.Run()
	if cmd.Process != nil {
		// SIGTERM the servers left in the group, and wait for them to exit
		// before their directory is removed; SIGKILL those that do not.
		group := -cmd.Process.Pid
		_ = syscall.Kill(group, syscall.SIGTERM)
		gone := func() bool { return syscall.Kill(group, 0) == syscall.ESRCH }
		if !wait.Until(time.Now().Add(45*time.Second), gone) {
			_ = syscall.Kill(group, syscall.SIGKILL)
			wait.Within(t, 10*time.Second, "the walkthrough's servers to exit", gone)
		}
	}
	if err != nil {
		logs := ""
		names, _ := filepath.Glob(filepath.Join(work, "*.log"))
		for _, name := range names {
			if b, rerr := os.ReadFile(name); rerr == nil {
				logs += fmt.Sprintf("\n--- %s (last 4 KiB) ---\n%s", filepath.Base(name), tail(b, 4096))
			}
		}
		t.Fatalf("the walkthrough of %s failed: %v\n%s%s", w.page, err, out.String(), logs)
	}
	if testing.Verbose() {
		t.Logf("the walkthrough of %s:\n%s", w.page, out.String())
	}
}

// walkthroughScript returns the sh blocks of the "## Walkthrough" section of
// the page at path, joined in order.
func walkthroughScript(t *testing.T, path string) string {
	t.Helper()
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(page), "\n## Walkthrough\n")
	if !ok {
		t.Fatalf("%s has no Walkthrough section", path)
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var script strings.Builder
	blocks := 0
	for {
		_, rest, ok := strings.Cut(section, "\n```sh\n")
		if !ok {
			break
		}
		block, after, ok := strings.Cut(rest, "\n```\n")
		if !ok {
			t.Fatalf("%s: an sh block of the walkthrough is not closed", path)
		}
		script.WriteString(block + "\n")
		section, blocks = after, blocks+1
	}
	if blocks < 5 {
		t.Fatalf("%s: only %d sh blocks in the walkthrough", path, blocks)
	}
	return script.String()
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
