package cli

import (
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// ProgressMode says how long work reports progress (--progress).
type ProgressMode int

const (
	// ProgressAuto picks a bar on a terminal, plain lines elsewhere, nothing for JSON.
	ProgressAuto ProgressMode = iota
	// ProgressBar is an animated bar with rate and ETA, redrawn in place.
	ProgressBar
	// ProgressLines is one plain line every interval: for logs and CI.
	ProgressLines
	// ProgressNone reports nothing.
	ProgressNone
)

// ParseProgressMode parses --progress.
func ParseProgressMode(s string) (ProgressMode, error) {
	switch s {
	case "auto", "":
		return ProgressAuto, nil
	case "bar":
		return ProgressBar, nil
	case "lines":
		return ProgressLines, nil
	case "none":
		return ProgressNone, nil
	}
	return 0, Usagef("--progress: %q is not one of auto, bar, lines, none", s)
}

// DefaultProgressInterval is the time between plain progress lines.
const DefaultProgressInterval = 10 * time.Second

// ProgressSetup is where progress may be reported and what the command prints
// meanwhile. Progress always goes to W (stderr), never to stdout.
type ProgressSetup struct {
	Mode     ProgressMode
	W        io.Writer
	Terminal bool // W is a terminal
	// StdoutTerminal is set when the command prints its records to stdout and stdout is
	// a terminal: the records are the progress, and a bar would tear them up.
	StdoutTerminal bool
	JSON           bool          // --output json: machine output, no progress in auto mode
	Interval       time.Duration // between plain lines; DefaultProgressInterval if zero
	now            func() time.Time
}

// resolve turns auto into a concrete mode.
func (s ProgressSetup) resolve() ProgressMode {
	if s.Mode != ProgressAuto {
		return s.Mode
	}
	switch {
	case s.JSON, s.StdoutTerminal:
		return ProgressNone
	case s.Terminal:
		return ProgressBar
	}
	return ProgressLines
}

// Progress counts finished work. Its methods are safe for concurrent use.
type Progress interface {
	// Add records n more finished units.
	Add(n int64)
	// Finish ends the report (clears a bar; prints a last line if lines were printed).
	Finish()
}

// Units of work.
const (
	UnitRecords = "records"
	UnitBytes   = "bytes"
)

// NewProgress starts a progress report of what (e.g. "produce"), counted in unit,
// out of total (unknown if <= 0).
func NewProgress(s ProgressSetup, what, unit string, total int64) Progress {
	switch s.resolve() {
	case ProgressBar:
		return newBar(s.W, what, unit, total)
	case ProgressLines:
		now := s.now
		if now == nil {
			now = time.Now
		}
		interval := s.Interval
		if interval <= 0 {
			interval = DefaultProgressInterval
		}
		t := now()
		return &lineProgress{w: s.W, what: what, unit: unit, total: total, interval: interval, now: now, start: t, last: t}
	}
	return noProgress{}
}

// NewSteps returns what reports each finished step of long work as a line
// "what: msg" on W, unless the setup reports no progress.
func NewSteps(s ProgressSetup, what string) func(msg string) {
	if s.resolve() == ProgressNone {
		return func(string) {}
	}
	return func(msg string) { fmt.Fprintf(s.W, "%s: %s\n", what, msg) }
}

type noProgress struct{}

func (noProgress) Add(int64) {}
func (noProgress) Finish()   {}

type barProgress struct{ bar *progressbar.ProgressBar }

func newBar(w io.Writer, what, unit string, total int64) barProgress {
	if total <= 0 {
		total = -1 // a spinner with count and rate
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(what),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSpinnerType(14),
	}
	if unit == UnitBytes {
		opts = append(opts, progressbar.OptionShowBytes(true))
	} else {
		opts = append(opts, progressbar.OptionSetItsString(unit))
	}
	return barProgress{progressbar.NewOptions64(total, opts...)}
}

func (b barProgress) Add(n int64) { b.bar.Add64(n) }
func (b barProgress) Finish()     { b.bar.Finish() }

// lineProgress prints a plain line when an Add comes at least interval after the
// previous line: no goroutine, and nothing at all for work shorter than interval.
type lineProgress struct {
	w          io.Writer
	what, unit string
	total      int64
	interval   time.Duration
	now        func() time.Time
	start      time.Time

	mu      sync.Mutex
	done    int64
	last    time.Time
	printed bool
}

func (p *lineProgress) Add(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	if t := p.now(); t.Sub(p.last) >= p.interval {
		p.last = t
		p.printed = true
		p.printLocked(t)
	}
}

func (p *lineProgress) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.printed {
		return
	}
	elapsed := p.now().Sub(p.start)
	fmt.Fprintf(p.w, "%s: done, %s in %s, %s/s\n", p.what, p.amount(float64(p.done)),
		elapsed.Round(time.Millisecond), p.amount(rate(p.done, elapsed)))
}

func (p *lineProgress) printLocked(t time.Time) {
	elapsed := t.Sub(p.start)
	r := rate(p.done, elapsed)
	if p.total <= 0 {
		fmt.Fprintf(p.w, "%s: %s, %s/s\n", p.what, p.amount(float64(p.done)), p.amount(r))
		return
	}
	eta := "unknown"
	if r > 0 && p.done < p.total {
		eta = time.Duration(float64(p.total-p.done) / r * float64(time.Second)).Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "%s: %s of %s (%d%%), %s/s, ETA %s\n", p.what,
		p.amount(float64(p.done)), p.amount(float64(p.total)), p.done*100/p.total, p.amount(r), eta)
}

func rate(done int64, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	return float64(done) / elapsed.Seconds()
}

// amount formats a count in the progress unit: records as integers, bytes scaled.
func (p *lineProgress) amount(v float64) string {
	if p.unit != UnitBytes {
		return fmt.Sprintf("%.0f %s", v, p.unit)
	}
	return Bytes(int64(v))
}

// Bytes formats a size in binary units: 512 B, 1.5 KiB, 3.0 GiB.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
