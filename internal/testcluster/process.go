package testcluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// process is one run of a node's binary, from start until it is reaped.
type process struct {
	cmd     *exec.Cmd
	started time.Time     // just after the fork and exec
	done    chan struct{} // closed once the process has exited and been reaped
	err     error         // cmd.Wait's answer; read only after done is closed
}

// spawner starts every child process from one goroutine locked to its OS thread
// for the life of the test process. Linux sends Pdeathsig when the thread that
// forked the child exits, not the process (go.dev/issue/27505), and the Go
// runtime may retire other threads; this one never exits, so the signal comes
// exactly when the test process dies.
var spawner struct {
	once sync.Once
	reqs chan spawnRequest
}

type spawnRequest struct {
	cmd *exec.Cmd
	err chan error
}

// startProcess starts cmd in its own process group, to be killed if this test
// process dies, and reaps it in the background.
func startProcess(cmd *exec.Cmd) (*process, error) {
	spawner.once.Do(func() {
		spawner.reqs = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread() // never unlocked, see spawner
			for r := range spawner.reqs {
				r.err <- r.cmd.Start()
			}
		}()
	})
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	req := spawnRequest{cmd: cmd, err: make(chan error, 1)}
	spawner.reqs <- req
	if err := <-req.err; err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, started: time.Now(), done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits up to timeout for the process to exit.
func (p *process) wait(timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// signal sends sig to the process; to its whole process group if group is set.
func (p *process) signal(sig syscall.Signal, group bool) error {
	pid := p.cmd.Process.Pid
	if group {
		pid = -pid
	}
	if err := syscall.Kill(pid, sig); err != nil && !p.exited() {
		return fmt.Errorf("kill(%d, %v): %w", pid, sig, err)
	}
	return nil
}

// waitState polls the kernel's view of the process (the state letter in
// /proc/PID/stat) until stopped matches it: SIGSTOP and SIGCONT take effect
// asynchronously, and a test that pauses a node must know it is paused before
// going on. Without /proc it returns at once.
func (p *process) waitState(stopped bool, timeout time.Duration) error {
	path := "/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/stat"
	deadline := time.Now().Add(timeout)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			if p.exited() {
				return fmt.Errorf("process exited: %v", p.err)
			}
			return nil // no /proc: trust the signal
		}
		// "pid (comm) S ...": the state follows the last ')'.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
			st := b[i+2]
			if (st == 'T' || st == 't') == stopped {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d did not reach stopped=%v within %v", p.cmd.Process.Pid, stopped, timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// exitCode is the process's exit status, or -1 if a signal ended it.
func (p *process) exitCode() int {
	return p.cmd.ProcessState.ExitCode()
}
