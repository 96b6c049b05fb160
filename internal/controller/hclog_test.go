package controller

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestHclogAdapter(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug - 4}))
	a := newHclogAdapter(l, slog.LevelWarn)

	a.Info("chatty", "k", 1)
	a.Debug("chattier")
	if buf.Len() != 0 {
		t.Fatalf("below the minimum level got through: %s", buf.String())
	}
	if a.IsInfo() || !a.IsWarn() || !a.IsError() {
		t.Error("Is* disagree with the minimum level")
	}

	a.Named("snapshot").With("node", "n1").Warn("slow", "took", hclog.Fmt("%dms", 42), "dangling")
	out := buf.String()
	for _, want := range []string{"level=WARN", "msg=slow", "component=raft.snapshot", "node=n1", "took=42ms", "extra=dangling"} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q lacks %q", out, want)
		}
	}

	buf.Reset()
	a.SetLevel(hclog.Trace)
	if a.GetLevel() != hclog.Trace || !a.IsTrace() {
		t.Error("SetLevel(Trace) not in effect")
	}
	a.Trace("fine detail")
	if !strings.Contains(buf.String(), "level=DEBUG-4") {
		t.Errorf("trace output %q", buf.String())
	}

	buf.Reset()
	a.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}).Print("[ERR] raft: failed to dial\n")
	if out := buf.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, `msg="raft: failed to dial"`) {
		t.Errorf("standard logger output %q", out)
	}
	buf.Reset()
	a.SetLevel(hclog.Off)
	a.Error("dropped")
	if buf.Len() != 0 {
		t.Errorf("Off level logged %q", buf.String())
	}
}
