// Package scripttest runs golden command scripts, the form the repository's
// state-machine tests take (etcd's datadriven tests are the model): a script in
// testdata is a list of commands, "> cmd args...", each followed by the output it
// must produce; blank and "#" lines are comments and belong to the command after
// them. Run with -rewrite to write the actual output back into the scripts.
//
// The package declares the -rewrite flag: a test package that uses it must not
// declare its own (group's and share's runners still do, and would drop theirs
// when they move here).
package scripttest

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden scripts with the actual output")

// Run runs every script matching glob as a subtest named after its file.
// newRunner is called once per script and returns the function that runs one
// command and returns its output lines. The first command whose output differs
// fails the subtest; with -rewrite the script is rewritten instead.
func Run(t *testing.T, glob string, newRunner func(t *testing.T) func(cmd string) []string) {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts match %s: %v", glob, err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), filepath.Ext(f)), func(t *testing.T) {
			runFile(t, f, newRunner(t))
		})
	}
}

func runFile(t *testing.T, path string, run func(cmd string) []string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	var want []string
	var cmd string
	failed := false
	flush := func() {
		if cmd == "" {
			return
		}
		got := run(cmd)
		for _, l := range got {
			out.WriteString(l + "\n")
		}
		if !*rewrite && !slices.Equal(got, want) && !failed {
			failed = true
			t.Errorf("%s: %q:\n--- want\n%s\n--- got\n%s", path, cmd, strings.Join(want, "\n"), strings.Join(got, "\n"))
		}
		cmd, want = "", nil
	}
	for line := range strings.Lines(string(data)) {
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "> "):
			flush()
			cmd = strings.TrimSpace(line[2:])
			out.WriteString(line + "\n")
		case line == "" || strings.HasPrefix(line, "#"):
			flush()
			out.WriteString(line + "\n")
		default:
			if cmd == "" {
				t.Fatalf("%s: output with no command before it: %q", path, line)
			}
			want = append(want, line)
		}
	}
	flush()
	if *rewrite {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
