package interop

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// javaApp is a long-running Java program of the suite (a Streams application, a
// Connect worker, MirrorMaker) whose stdout and stderr are kept in memory.
type javaApp struct {
	name string // for messages: "the Streams application", "worker 2"
	cmd  *exec.Cmd
	done chan struct{}
	err  error // set before done closes
	// termStatus is an exit status that also counts as clean after SIGTERM: a
	// JVM that leaves SIGTERM to its shutdown hooks exits with 143.
	termStatus int
	mu         sync.Mutex
	log        strings.Builder
}

// startJavaApp runs java with the suite's JVM flags, timestamped SLF4J log lines
// (to line up with the brokers' logs) and args; it is killed at the test's end
// if still running.
func startJavaApp(t *testing.T, name string, args ...string) *javaApp {
	t.Helper()
	args = slices.Concat(javaFlags, []string{"-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS"}, args)
	a := &javaApp{name: name, cmd: exec.Command("java", args...), done: make(chan struct{})}
	pr, pw := io.Pipe()
	a.cmd.Stdout, a.cmd.Stderr = pw, pw
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			a.mu.Lock()
			a.log.WriteString(sc.Text() + "\n")
			a.mu.Unlock()
		}
	}()
	go func() {
		a.err = a.cmd.Wait()
		pw.Close()
		close(a.done)
	}()
	t.Cleanup(a.kill)
	return a
}

func (a *javaApp) exited() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// output is the last lines the program printed.
func (a *javaApp) output() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return lastLines([]byte(a.log.String()))
}

// logged reports whether the program printed a line containing s.
func (a *javaApp) logged(s string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return strings.Contains(a.log.String(), s)
}

// kill sends SIGKILL (a crash) and waits for the process to go.
func (a *javaApp) kill() {
	if !a.exited() {
		a.cmd.Process.Kill()
		<-a.done
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (a *javaApp) stop() error {
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-a.done:
	case <-time.After(90 * time.Second):
		a.kill()
		return fmt.Errorf("%s ignored SIGTERM for 90s\n%s", a.name, a.output())
	}
	if a.err != nil && (a.termStatus == 0 || a.cmd.ProcessState.ExitCode() != a.termStatus) {
		return fmt.Errorf("%s exited with %v\n%s", a.name, a.err, a.output())
	}
	return nil
}
