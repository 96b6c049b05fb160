package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

// readmeStep is one command of the README's HTTP walkthrough and the output it
// shows.
type readmeStep struct {
	command string
	output  string
}

// readmeSteps reads the section of README.md between the walkthrough markers: each
// ```sh block (one command) followed by a ```json block (its output).
func readmeSteps(t *testing.T) []readmeStep {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "<!-- http-walkthrough:start -->")
	section, _, ok2 := strings.Cut(rest, "<!-- http-walkthrough:end -->")
	if !ok || !ok2 {
		t.Fatal("README.md has no http-walkthrough section")
	}
	var steps []readmeStep
	var block, lang string
	var in bool
	for line := range strings.Lines(section) {
		trimmed := strings.TrimSpace(line)
		switch {
		case !in && strings.HasPrefix(trimmed, "```"):
			in, lang, block = true, strings.TrimPrefix(trimmed, "```"), ""
		case in && trimmed == "```":
			in = false
			switch lang {
			case "sh":
				steps = append(steps, readmeStep{command: strings.TrimSpace(block)})
			case "json":
				if len(steps) == 0 || steps[len(steps)-1].output != "" {
					t.Fatalf("README walkthrough: a json block that follows no command:\n%s", block)
				}
				steps[len(steps)-1].output = strings.TrimSpace(block)
			default:
				t.Fatalf("README walkthrough: a %q block; only sh and json are run", lang)
			}
		case in:
			block += line
		}
	}
	if in {
		t.Fatal("README walkthrough: an unclosed code block")
	}
	return steps
}

// volatile are the fields whose values change from run to run: the walkthrough's
// values only show their shape.
var volatile = map[string]bool{"timestamp": true, "member_id": true}

// TestReadmeWalkthrough runs every curl command of the README's HTTP walkthrough
// against a live node and compares its output with the one shown.
func TestReadmeWalkthrough(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is not installed; scripts/install-curl.sh installs it")
	}
	steps := readmeSteps(t)
	if len(steps) < 6 {
		t.Fatalf("the walkthrough has %d commands", len(steps))
	}
	n := startNode(t)
	addr := n.HTTPAddr()
	for i, s := range steps {
		if !strings.HasPrefix(s.command, "curl ") || strings.Count(s.command, "\n") > 0 {
			t.Fatalf("step %d: want one curl command, got %q", i+1, s.command)
		}
		if s.output == "" {
			t.Fatalf("step %d (%s): no output shown", i+1, s.command)
		}
		cmd := strings.ReplaceAll(s.command, "127.0.0.1:8080", addr)
		out, err := exec.Command("sh", "-c", cmd).Output()
		if err != nil {
			t.Fatalf("step %d: %s: %v", i+1, cmd, err)
		}
		// Member client ids name the node's address.
		out = bytes.ReplaceAll(out, []byte(addr), []byte("127.0.0.1:8080"))
		if err := matchJSON(s.output, out); err != nil {
			t.Fatalf("step %d: %s\nprinted  %s\nREADME   %s\n%v", i+1, s.command, bytes.TrimSpace(out), s.output, err)
		}
	}
}

// matchJSON compares printed JSON with the README's: equal but for volatile
// fields, which need only have the same type.
func matchJSON(want string, got []byte) error {
	var w, g any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		return fmt.Errorf("README output is not JSON: %v", err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		return fmt.Errorf("printed output is not JSON: %v", err)
	}
	return matchValue("$", w, g)
}

func matchValue(at string, w, g any) error {
	switch wv := w.(type) {
	case map[string]any:
		gv, ok := g.(map[string]any)
		if !ok || len(gv) != len(wv) {
			return fmt.Errorf("%s: printed %v, README %v", at, g, w)
		}
		for k, x := range wv {
			y, ok := gv[k]
			if !ok {
				return fmt.Errorf("%s: printed no %s", at, k)
			}
			if volatile[k] {
				if reflect.TypeOf(x) != reflect.TypeOf(y) {
					return fmt.Errorf("%s.%s: printed %v, README %v", at, k, y, x)
				}
				continue
			}
			if err := matchValue(at+"."+k, x, y); err != nil {
				return err
			}
		}
		return nil
	case []any:
		gv, ok := g.([]any)
		if !ok || len(gv) != len(wv) {
			return fmt.Errorf("%s: printed %v, README %v", at, g, w)
		}
		for i := range wv {
			if err := matchValue(fmt.Sprintf("%s[%d]", at, i), wv[i], gv[i]); err != nil {
				return err
			}
		}
		return nil
	}
	if !reflect.DeepEqual(w, g) {
		return fmt.Errorf("%s: printed %v, README %v", at, g, w)
	}
	return nil
}
