package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/handlers"
	"github.com/strata-stream/strata/internal/vfs"
)

// nodeOnlyKeys are the APIs one node sends another or its controller
// (registration, heartbeats, Raft, ISR changes, producer id blocks) and
// ControlledShutdown: a fuzzed one can fence or stop the node under test, after
// which every later input would fail for that reason alone.
var nodeOnlyKeys = map[int16]bool{7: true, 52: true, 53: true, 54: true, 56: true, 62: true, 63: true, 64: true, 67: true, 80: true, 81: true, 82: true}

// FuzzRequests sends one node every request a client can send that kmsg
// decodes, whatever its fields say, and wants an answer and no panic. The
// request path recovers a handler's panic and closes the connection, so a
// panic would not crash a broker, but it can leave a lock held or state half
// changed: the node's log is watched for one. A request still unanswered after
// the exchange's timeout is left (a fetch may wait as long as it asks); one
// whose connection is closed without an answer fails.
func FuzzRequests(f *testing.F) {
	panics := &panicRecorder{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := Start(ctx, nodeConfig(f.TempDir()), slog.New(panics), vfs.Default)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { n.Close() })
	type served struct{ min, max int16 }
	versions := map[int16]served{}
	for _, vr := range handlers.Versions() {
		if nodeOnlyKeys[vr.Key] {
			continue
		}
		// Versions below RefuseBelow are listed and refused (Produce v0-v2).
		k := served{max(vr.Min, vr.RefuseBelow), vr.Max}
		versions[vr.Key] = k
		for _, v := range []int16{k.min, k.max} {
			req := kmsg.RequestForKey(vr.Key)
			req.SetVersion(v)
			f.Add(vr.Key, v, req.AppendTo(nil))
		}
	}
	f.Fuzz(func(t *testing.T, key, version int16, body []byte) {
		k, ok := versions[key]
		if !ok || version < k.min || version > k.max {
			return
		}
		req := kmsg.RequestForKey(key)
		req.SetVersion(version)
		if req.ReadFrom(body) != nil {
			return // framing and decoding: protocol's FuzzReadRequest
		}
		_, err := roundTrip(n.KafkaAddr(), req, 5*time.Second)
		if p := panics.take(); p != "" {
			t.Fatalf("%s v%d: the node panicked: %s", kmsg.NameForKey(key), version, p)
		}
		if ne := (net.Error)(nil); err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			t.Fatalf("%s v%d: no answer: %v", kmsg.NameForKey(key), version, err)
		}
	})
}

// panicRecorder is a slog handler that keeps the panics the request path
// logs and drops everything else.
type panicRecorder struct {
	mu     sync.Mutex
	panics []string
}

func (r *panicRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *panicRecorder) Handle(_ context.Context, rec slog.Record) error {
	if os.Getenv("ZZ") != "" {
		fmt.Fprintln(os.Stderr, rec.Message, rec.Level)
		rec.Attrs(func(a slog.Attr) bool { fmt.Fprintln(os.Stderr, "  ", a.Key, a.Value); return true })
	}
	if !strings.Contains(rec.Message, "panic") {
		return nil
	}
	var b strings.Builder
	b.WriteString(rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, "\n%s: %v", a.Key, a.Value)
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.panics = append(r.panics, b.String())
	return nil
}

func (r *panicRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *panicRecorder) WithGroup(string) slog.Handler      { return r }

// take returns the panics logged since the last call, joined.
func (r *panicRecorder) take() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := strings.Join(r.panics, "\n\n")
	r.panics = nil
	return p
}
