package main

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/strata-stream/strata/internal/cli"
)

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestNoBroker(t *testing.T) {
	addr := closedAddr(t)
	want := `no broker at ` + addr + `: is "strata server" running?`
	for _, args := range [][]string{
		{"topic", "list"},
		{"topic", "create", "x"},
		{"cluster", "status"},
		{"group", "list"},
		{"consume", "x"},
		{"produce", "x"},
	} {
		r := invocation{stdin: "v\n", env: map[string]string{cli.BrokersEnv: addr}}.run(t, args...)
		var nb *cli.NoBrokerError
		if r.code != 1 || !errors.As(r.err, &nb) || r.err.Error() != want {
			t.Errorf("%v: %s\nwant error %q", args, r, want)
		}
	}
	// --brokers wins over the environment.
	r := invocation{env: map[string]string{cli.BrokersEnv: addr}}.run(t, "topic", "list", "--brokers", broker(t))
	if r.code != 0 {
		t.Fatalf("--brokers over %s: %s", cli.BrokersEnv, r)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"topic", "create"},
		{"topic", "create", "a", "b"},
		{"topic", "create", "x", "-p", "0"},
		{"topic", "create", "x", "-c", "novalue"},
		{"topic", "crate", "x"},
		{"topic", "list", "--bogus"},
		{"topic", "list", "--output", "yaml"},
		{"topic", "list", "--timeout", "0s"},
		{"topic", "list", "--brokers", "nohostport"},
		{"topic", "describe"},
		{"group", "reset-offsets", "g", "--topic", "t"},
		{"group", "reset-offsets", "g", "--to", "earliest"},
		{"group", "reset-offsets", "g", "--to", "soon", "--topic", "t"},
		{"consume", "t", "--group", "g", "--partition", "0"},
		{"consume", "t", "--count", "-1"},
		{"cluster", "status", "extra"},
		{"topic", "list", "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "admin"}, // no password
	} {
		r := run(t, args...)
		if r.code != 2 {
			t.Errorf("%v: %s", args, r)
		}
	}
}

// runMain runs the real main() in a subprocess, as a shell would.
func runMain(t *testing.T, brokers string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1", cli.BrokersEnv+"="+brokers)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

func TestExitStatusOfTheBinary(t *testing.T) {
	addr := broker(t)
	closed := closedAddr(t)
	for _, tc := range []struct {
		name    string
		brokers string
		args    []string
		code    int
		stderr  string
	}{
		{"ok", addr, []string{"topic", "list"}, 0, ""},
		{"no broker", closed, []string{"topic", "list"}, 1, `strata: no broker at ` + closed + `: is "strata server" running?`},
		{"unknown topic", addr, []string{"topic", "describe", "no-such-topic"}, 1, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"missing argument", addr, []string{"topic", "create"}, 2, "Run 'strata topic create --help' for usage."},
		{"bad flag", addr, []string{"consume", "t", "--bogus"}, 2, "unknown flag: --bogus"},
		{"bad value", addr, []string{"topic", "list", "-o", "yaml"}, 2, `--output: "yaml"`},
		{"unknown subcommand", addr, []string{"group", "lst"}, 2, "did you mean list?"},
		{"unknown command", addr, []string{"topc", "list"}, 2, `strata: unknown command "topc" for "strata"; did you mean topic?`},
		{"bad root flag", addr, []string{"--bogus"}, 2, "Run 'strata --help' for usage."},
		{"bad server flag", addr, []string{"server", "--bogus"}, 2, "Run 'strata server --help' for usage."},
		{"bad server flag value", addr, []string{"server", "--node-id", "one"}, 2, `invalid argument "one" for "--node-id"`},
		{"unknown dev subcommand", addr, []string{"dev", "clustr"}, 2, `unknown command "clustr" for "strata dev"; did you mean cluster?`},
		{"bad dev flag", addr, []string{"dev", "cluster", "--nodes", "x"}, 2, "Run 'strata dev cluster --help' for usage."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runMain(t, tc.brokers, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("strata %v: exit %d, stderr %q; want exit %d, stderr with %q", tc.args, code, stderr, tc.code, tc.stderr)
			}
		})
	}
}

func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		r := run(t, "completion", shell)
		if r.code != 0 || !strings.Contains(r.stdout, "strata") {
			t.Errorf("completion %s: %s", shell, r)
		}
	}
	topic := topicName(t)
	mustRun(t, "topic", "create", topic)
	r := mustRun(t, "__complete", "topic", "describe", "testcompl")
	if !strings.Contains(r.stdout, topic+"\n") {
		t.Fatalf("topic names not completed:\n%s", r.stdout)
	}
	r = mustRun(t, "__complete", "produce", topic, "--compression", "")
	if !strings.Contains(r.stdout, "zstd\n") {
		t.Fatalf("--compression values not completed:\n%s", r.stdout)
	}
}
