package controller

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter is an hclog.Logger that writes to slog, so raft's logs join the
// server's. Records below its minimum level (Warn by default: raft is chatty at
// Info) are dropped before formatting.
type hclogAdapter struct {
	log     *slog.Logger
	name    string
	implied []any
	min     *atomic.Int32 // an hclog.Level; shared by derived loggers
}

var _ hclog.Logger = (*hclogAdapter)(nil)

func newHclogAdapter(l *slog.Logger, min slog.Level) *hclogAdapter {
	a := &hclogAdapter{log: l, name: "raft", min: new(atomic.Int32)}
	a.min.Store(int32(hclogLevel(min)))
	return a
}

func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func hclogLevel(l slog.Level) hclog.Level {
	switch {
	case l < slog.LevelDebug:
		return hclog.Trace
	case l < slog.LevelInfo:
		return hclog.Debug
	case l < slog.LevelWarn:
		return hclog.Info
	case l < slog.LevelError:
		return hclog.Warn
	}
	return hclog.Error
}

func (a *hclogAdapter) enabled(l hclog.Level) bool {
	return l != hclog.Off && l >= hclog.Level(a.min.Load()) &&
		a.log.Enabled(context.Background(), slogLevel(l))
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	if !a.enabled(level) {
		return
	}
	attrs := make([]any, 0, 2+len(a.implied)+len(args))
	attrs = append(attrs, "component", a.name)
	attrs = append(attrs, a.implied...)
	attrs = append(attrs, convertArgs(args)...)
	a.log.Log(context.Background(), slogLevel(level), msg, attrs...)
}

// convertArgs turns hclog's alternating key/values into slog's: keys become
// strings, hclog.Format values are formatted, a lone last value gets a key.
func convertArgs(args []any) []any {
	out := make([]any, 0, len(args)+1)
	for i := 0; i < len(args); i += 2 {
		if i+1 == len(args) {
			out = append(out, "extra", args[i])
			break
		}
		v := args[i+1]
		if f, ok := v.(hclog.Format); ok && len(f) > 0 {
			if format, ok := f[0].(string); ok {
				v = fmt.Sprintf(format, f[1:]...)
			}
		}
		out = append(out, fmt.Sprint(args[i]), v)
	}
	return out
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

func (a *hclogAdapter) IsTrace() bool { return a.enabled(hclog.Trace) }
func (a *hclogAdapter) IsDebug() bool { return a.enabled(hclog.Debug) }
func (a *hclogAdapter) IsInfo() bool  { return a.enabled(hclog.Info) }
func (a *hclogAdapter) IsWarn() bool  { return a.enabled(hclog.Warn) }
func (a *hclogAdapter) IsError() bool { return a.enabled(hclog.Error) }

func (a *hclogAdapter) ImpliedArgs() []any { return a.implied }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	c := *a
	c.implied = append(append([]any(nil), a.implied...), convertArgs(args)...)
	return &c
}

func (a *hclogAdapter) Name() string { return a.name }

func (a *hclogAdapter) Named(name string) hclog.Logger {
	c := *a
	c.name = a.name + "." + name
	return &c
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	c := *a
	c.name = name
	return &c
}

func (a *hclogAdapter) SetLevel(l hclog.Level) { a.min.Store(int32(l)) }
func (a *hclogAdapter) GetLevel() hclog.Level  { return hclog.Level(a.min.Load()) }

func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

func (a *hclogAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	w := &stdWriter{a: a, level: hclog.NoLevel}
	if opts != nil {
		w.level = opts.ForceLevel
	}
	return w
}

// stdWriter logs each line written by a standard-library logger; the level is
// forced, or read from a "[WARN]"-style prefix, else Info.
type stdWriter struct {
	a     *hclogAdapter
	level hclog.Level
}

func (w *stdWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		level, msg := w.level, line
		if level == hclog.NoLevel {
			level, msg = inferLevel(line)
		}
		w.a.Log(level, msg)
	}
	return len(p), nil
}

func inferLevel(line string) (hclog.Level, string) {
	for _, p := range []struct {
		prefix string
		level  hclog.Level
	}{{"[TRACE]", hclog.Trace}, {"[DEBUG]", hclog.Debug}, {"[INFO]", hclog.Info},
		{"[WARN]", hclog.Warn}, {"[ERR]", hclog.Error}, {"[ERROR]", hclog.Error}} {
		if i := strings.Index(line, p.prefix); i >= 0 {
			return p.level, strings.TrimSpace(line[i+len(p.prefix):])
		}
	}
	return hclog.Info, line
}
