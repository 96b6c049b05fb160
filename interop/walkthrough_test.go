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

// A walkthrough is a section of a page of the docs (by default its "##
// Walkthrough"): its sh blocks, run in order as one bash script (set -euo
// pipefail) in an empty directory, with the strata binary and Kafka 4.4's
// tools on the PATH, so the page cannot drift from what works. The servers it
// starts in the background are stopped with its process group.
type walkthrough struct {
	page    string // the page, relative to docs/ ("../README.md" for the README)
	section string // the heading of the section; "Walkthrough" when empty
	// ports are the port numbers the page names (as ":9092"); each is replaced
	// by one free on every one of hosts.
	ports, hosts []string
	// env is set for the script, its values with the ports replaced as the
	// page's are: it moves the listeners a page leaves at their defaults.
	env map[string]string
	// replace maps text of the page to what runs instead (a build the test
	// has done already).
	replace map[string]string
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
	section := w.section
	if section == "" {
		section = "Walkthrough"
	}
	script := walkthroughScript(t, filepath.Join("..", "docs", w.page), section)
	for old, instead := range w.replace {
		if !strings.Contains(script, old) {
			t.Fatalf("%s: the %s section has no %q", w.page, section, old)
		}
		script = strings.ReplaceAll(script, old, instead)
	}
	ports, err := freeport.Ports(len(w.ports), w.hosts...)
	if err != nil {
		t.Fatal(err)
	}
	var pairs []string
	for i, p := range w.ports {
		pairs = append(pairs, ":"+p, fmt.Sprintf(":%d", ports[i]))
	}
	freePorts := strings.NewReplacer(pairs...)
	script = freePorts.Replace(script)
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
	for k, v := range w.env {
		cmd.Env = append(cmd.Env, k+"="+freePorts.Replace(v))
	}
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

// walkthroughScript returns the sh blocks of the "## <section>" section of
// the page at path, joined in order.
func walkthroughScript(t *testing.T, path, section string) string {
	t.Helper()
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, text, ok := strings.Cut(string(page), "\n## "+section+"\n")
	if !ok {
		t.Fatalf("%s has no %s section", path, section)
	}
	if end := strings.Index(text, "\n## "); end >= 0 {
		text = text[:end]
	}
	var script strings.Builder
	blocks := 0
	for {
		_, rest, ok := strings.Cut(text, "\n```sh\n")
		if !ok {
			break
		}
		block, after, ok := strings.Cut(rest, "\n```\n")
		if !ok {
			t.Fatalf("%s: an sh block of the %s section is not closed", path, section)
		}
		script.WriteString(block + "\n")
		text, blocks = after, blocks+1
	}
	if blocks == 0 {
		t.Fatalf("%s: no sh block in the %s section", path, section)
	}
	return script.String()
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// TestReadmeTryIt runs the README's "Try it": one node built and started as
// the README shows, waited for, written to and read with strata and kcat, then
// stopped. The listeners the README leaves at their defaults move to free
// ports through the environment.
func TestReadmeTryIt(t *testing.T) {
	walkthrough{
		page:    "../README.md",
		section: "Try it",
		ports:   []string{"9092", "8080", "9093"},
		hosts:   []string{"127.0.0.1"},
		env: map[string]string{
			"STRATA_KAFKA_ADDR":      "127.0.0.1:9092",
			"STRATA_HTTP_ADDR":       "127.0.0.1:8080",
			"STRATA_CONTROLLER_ADDR": "127.0.0.1:9093",
			"STRATA_BROKERS":         "127.0.0.1:9092",
		},
		replace: map[string]string{"go build -o strata ./cmd/strata": `ln -s "$(command -v strata)" strata`},
		tools:   []string{"curl", "kcat"},
		timeout: 2 * time.Minute,
	}.run(t)
}
