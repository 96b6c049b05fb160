// Package loglevels gives a node's log lines levels that change while it runs:
// one per component (the "component" attribute its loggers are made with) and a
// root level for every line without its own. It is what Kafka's BROKER_LOGGER
// config resource (kafka-configs --entity-type broker-loggers) reads and sets.
//
// Levels wraps the node's slog handler (Handler); the wrapped handler must
// accept every level, since the wrapper decides. Levels are not persisted: a
// restarted node starts from its --log-level, as a Kafka broker starts from its
// log4j configuration.
package loglevels

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Root names the root logger, whose level applies to every component without
// its own.
const Root = "root"

// Trace and Fatal are Kafka's (log4j's) levels beyond slog's four.
const (
	Trace = slog.LevelDebug - 4
	Fatal = slog.LevelError + 4
)

// Errors of Set and Unset.
var (
	// ErrUnknownLogger: no logger of that name was made.
	ErrUnknownLogger = errors.New("unknown logger")
	// ErrBadLevel: not one of TRACE, DEBUG, INFO, WARN, ERROR, FATAL.
	ErrBadLevel = errors.New("unsupported log level")
	// ErrRootLevel: the root logger's level cannot be removed.
	ErrRootLevel = errors.New("the root logger's level cannot be removed")
)

// Levels holds the root level and each component's.
type Levels struct {
	root atomic.Int64 // a slog.Level
	mu   struct {
		sync.Mutex
		components map[string]*component
	}
}

type component struct {
	level atomic.Int64 // a slog.Level, when own is set
	own   atomic.Bool
}

// New returns levels with root as the root level and no component's own.
func New(root slog.Level) *Levels {
	l := &Levels{}
	l.root.Store(int64(root))
	l.mu.components = map[string]*component{}
	return l
}

// Handler wraps h: a line is handled when its level is at least its
// component's (or the root's).
func (l *Levels) Handler(h slog.Handler) slog.Handler { return &handler{levels: l, next: h} }

// From returns the levels behind logger, or nil when its handler is not theirs.
func From(logger *slog.Logger) *Levels {
	if h, ok := logger.Handler().(*handler); ok {
		return h.levels
	}
	return nil
}

// Logger is one logger and its effective level, as Kafka names it.
type Logger struct{ Name, Level string }

// List returns the root logger, then every component's, by name.
func (l *Levels) List() []Logger {
	root := slog.Level(l.root.Load())
	l.mu.Lock()
	out := make([]Logger, 0, len(l.mu.components)+1)
	for name, c := range l.mu.components {
		out = append(out, Logger{name, levelName(c.effective(root))})
	}
	l.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return append([]Logger{{Root, levelName(root)}}, out...)
}

// Check reports whether name may be set to level (Set without setting).
func (l *Levels) Check(name, level string) error {
	if _, err := ParseLevel(level); err != nil {
		return err
	}
	if name == Root {
		return nil
	}
	_, err := l.lookup(name)
	return err
}

// Set gives the logger name (Root or a component) the level.
func (l *Levels) Set(name, level string) error {
	lv, err := ParseLevel(level)
	if err != nil {
		return err
	}
	if name == Root {
		l.root.Store(int64(lv))
		return nil
	}
	c, err := l.lookup(name)
	if err != nil {
		return err
	}
	c.level.Store(int64(lv))
	c.own.Store(true)
	return nil
}

// Unset removes a component's own level: it takes the root's again.
func (l *Levels) Unset(name string) error {
	if name == Root {
		return ErrRootLevel
	}
	c, err := l.lookup(name)
	if err != nil {
		return err
	}
	c.own.Store(false)
	return nil
}

func (l *Levels) lookup(name string) (*component, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.mu.components[name]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownLogger, name)
	}
	return c, nil
}

func (l *Levels) component(name string) *component {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.mu.components[name]
	if !ok {
		c = &component{}
		l.mu.components[name] = c
	}
	return c
}

func (c *component) effective(root slog.Level) slog.Level {
	if c != nil && c.own.Load() {
		return slog.Level(c.level.Load())
	}
	return root
}

// ParseLevel reads one of Kafka's level names: TRACE, DEBUG, INFO, WARN, ERROR
// or FATAL.
func ParseLevel(s string) (slog.Level, error) {
	switch s {
	case "TRACE":
		return Trace, nil
	case "DEBUG":
		return slog.LevelDebug, nil
	case "INFO":
		return slog.LevelInfo, nil
	case "WARN":
		return slog.LevelWarn, nil
	case "ERROR":
		return slog.LevelError, nil
	case "FATAL":
		return Fatal, nil
	}
	return 0, fmt.Errorf("%w %q: want one of TRACE, DEBUG, INFO, WARN, ERROR, FATAL", ErrBadLevel, s)
}

func levelName(l slog.Level) string {
	switch {
	case l <= Trace:
		return "TRACE"
	case l <= slog.LevelDebug:
		return "DEBUG"
	case l <= slog.LevelInfo:
		return "INFO"
	case l <= slog.LevelWarn:
		return "WARN"
	case l <= slog.LevelError:
		return "ERROR"
	}
	return "FATAL"
}

// handler filters by its component's level; comp is nil until a "component"
// attribute names one.
type handler struct {
	levels *Levels
	next   slog.Handler
	comp   *component
}

func (h *handler) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= h.comp.effective(slog.Level(h.levels.root.Load())) && h.next.Enabled(ctx, level)
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error { return h.next.Handle(ctx, r) }

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := h.comp
	for _, a := range attrs {
		if a.Key == "component" {
			c = h.levels.component(strings.TrimSpace(a.Value.String()))
		}
	}
	return &handler{levels: h.levels, next: h.next.WithAttrs(attrs), comp: c}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{levels: h.levels, next: h.next.WithGroup(name), comp: h.comp}
}
