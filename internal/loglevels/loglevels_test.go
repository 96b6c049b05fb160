package loglevels

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

func TestLevels(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.LevelInfo)
	logger := slog.New(l.Handler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: Trace})))
	if From(logger) != l || From(slog.New(slog.DiscardHandler)) != nil {
		t.Fatal("From does not find the levels behind a logger")
	}
	group, kafka := logger.With("component", "group"), logger.With("component", "kafka")
	lines := func() []string {
		defer buf.Reset()
		var out []string
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			if _, msg, ok := strings.Cut(line, "msg="); ok {
				out = append(out, strings.Fields(msg)[0])
			}
		}
		return out
	}
	logAll := func() {
		logger.Debug("root-debug")
		group.Debug("group-debug")
		group.Info("group-info")
		kafka.Debug("kafka-debug")
		kafka.Warn("kafka-warn")
	}
	for _, step := range []struct {
		name string
		do   func() error
		err  error
		want []string
		list []Logger
	}{
		{name: "root INFO", do: func() error { return nil },
			want: []string{"group-info", "kafka-warn"},
			list: []Logger{{"root", "INFO"}, {"group", "INFO"}, {"kafka", "INFO"}}},
		{name: "group DEBUG", do: func() error { return l.Set("group", "DEBUG") },
			want: []string{"group-debug", "group-info", "kafka-warn"},
			list: []Logger{{"root", "INFO"}, {"group", "DEBUG"}, {"kafka", "INFO"}}},
		{name: "root ERROR leaves group's own", do: func() error { return l.Set(Root, "ERROR") },
			want: []string{"group-debug", "group-info"},
			list: []Logger{{"root", "ERROR"}, {"group", "DEBUG"}, {"kafka", "ERROR"}}},
		{name: "group unset takes the root's", do: func() error { return l.Unset("group") },
			want: nil,
			list: []Logger{{"root", "ERROR"}, {"group", "ERROR"}, {"kafka", "ERROR"}}},
		{name: "root TRACE", do: func() error { return l.Set(Root, "TRACE") },
			want: []string{"root-debug", "group-debug", "group-info", "kafka-debug", "kafka-warn"},
			list: []Logger{{"root", "TRACE"}, {"group", "TRACE"}, {"kafka", "TRACE"}}},
		{name: "bad level", do: func() error { return l.Set("kafka", "BAD") }, err: ErrBadLevel,
			want: []string{"root-debug", "group-debug", "group-info", "kafka-debug", "kafka-warn"}},
		{name: "lower-case level", do: func() error { return l.Set("kafka", "debug") }, err: ErrBadLevel},
		{name: "unknown logger", do: func() error { return l.Set("no.such", "INFO") }, err: ErrUnknownLogger},
		{name: "unset unknown logger", do: func() error { return l.Unset("no.such") }, err: ErrUnknownLogger},
		{name: "unset root", do: func() error { return l.Unset(Root) }, err: ErrRootLevel},
		{name: "check", do: func() error { return l.Check("kafka", "FATAL") }},
		{name: "check unknown", do: func() error { return l.Check("no.such", "FATAL") }, err: ErrUnknownLogger},
	} {
		if err := step.do(); !errors.Is(err, step.err) || (err == nil) != (step.err == nil) {
			t.Errorf("%s: err %v, want %v", step.name, err, step.err)
		}
		if step.want == nil && step.list == nil { // nothing to log or list
			continue
		}
		logAll()
		if got := lines(); !slices.Equal(got, step.want) {
			t.Errorf("%s: logged %v, want %v", step.name, got, step.want)
		}
		if step.list != nil && !slices.Equal(l.List(), step.list) {
			t.Errorf("%s: List() = %v, want %v", step.name, l.List(), step.list)
		}
	}
}
