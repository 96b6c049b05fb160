package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/handlers"
	"github.com/strata-stream/strata/internal/vfs"
)

// nodeOnlyKeys are the APIs one node sends another or its controller
// (registration, heartbeats, Raft, ISR changes, producer id blocks) and
// ControlledShutdown: a fuzzed one can fence or stop the node under test, after
// which every later input would fail for that reason alone. FuzzNodeRequests
// sends them to nodes of each input's own.
var nodeOnlyKeys = map[int16]bool{7: true, 52: true, 53: true, 54: true, 56: true, 62: true, 63: true, 64: true, 67: true, 80: true, 81: true, 82: true}

// FuzzRequests sends two nodes every request a client can send that kmsg
// decodes, whatever its fields say, and wants an answer and no panic: one
// node without an authorizer, and one whose ACLs deny this client what names
// start with "d" (topics, groups, transactional ids), so that a request naming
// both kinds goes through the authorizer's filtering and the merging of the
// refused part back into the answer. The request path recovers a handler's
// panic and closes the connection, so a panic would not crash a broker, but
// it can leave a lock held or state half changed: the nodes' logs are watched
// for one. After each request the nodes' /metrics must still gather without
// error and the console's groups page must still answer: a name a client
// chose (a group id) ends up in a label and on the page. A request still
// unanswered after the exchange's timeout is left (a
// fetch may wait as long as it asks); one whose connection is closed without
// an answer fails.
func FuzzRequests(f *testing.F) {
	panics := &panicRecorder{}
	start := func(cfg config.Config) *Node {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		n, err := Start(ctx, cfg, slog.New(panics), vfs.Default)
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { n.Close() })
		return n
	}
	open := start(nodeConfig(f.TempDir()))
	cfg := nodeConfig(f.TempDir())
	cfg.Authorizer, cfg.AllowEveryoneIfNoACL = "acl", true
	guarded := start(cfg)
	denyNamesStartingWithD(f, guarded.KafkaAddr())
	versions := servedKeys(handlers.Versions(), func(key int16) bool { return nodeOnlyKeys[key] })
	emptyRequests(versions, func(key, version int16, body []byte) { f.Add(key, version, body) })
	for _, req := range mixedSeeds() {
		k := versions[req.Key()]
		req.SetVersion(k.max)
		f.Add(req.Key(), k.max, req.AppendTo(nil))
	}
	for _, req := range notUTF8Seeds() {
		f.Add(req.Key(), req.GetVersion(), req.AppendTo(nil))
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
		for _, n := range []*Node{open, guarded} {
			addr := n.KafkaAddr()
			_, err := roundTrip(addr, req, 5*time.Second)
			if p := panics.take(); p != "" {
				t.Fatalf("%s v%d to %s: the node panicked: %s", kmsg.NameForKey(key), version, addr, p)
			}
			if ne := (net.Error)(nil); err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
				t.Fatalf("%s v%d to %s: no answer: %v", kmsg.NameForKey(key), version, addr, err)
			}
			if _, err := n.metrics.Registry().Gather(); err != nil {
				t.Fatalf("%s v%d to %s: /metrics no longer gathers: %v", kmsg.NameForKey(key), version, addr, err)
			}
			if resp, err := http.Get("http://" + n.HTTPAddr() + "/console/groups"); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("%s v%d to %s: the console's groups page: %v %v", kmsg.NameForKey(key), version, addr, resp, err)
			} else {
				resp.Body.Close()
			}
		}
	})
}

// mixedSeeds are requests naming both a resource the guarded node refuses
// ("d...") and one it allows, for the fuzzer to start from.
func mixedSeeds() []kmsg.Request {
	metadata := kmsg.NewPtrMetadataRequest()
	create := kmsg.NewPtrCreateTopicsRequest()
	produce := kmsg.NewPtrProduceRequest()
	produce.Acks = -1
	fetch := kmsg.NewPtrFetchRequest()
	offsets := kmsg.NewPtrOffsetFetchRequest()
	configs := kmsg.NewPtrDescribeConfigsRequest()
	return []kmsg.Request{
		naming(metadata, &metadata.Topics, func(name string) kmsg.MetadataRequestTopic {
			t := kmsg.NewMetadataRequestTopic()
			t.Topic = kmsg.StringPtr(name)
			return t
		}),
		naming(create, &create.Topics, func(name string) kmsg.CreateTopicsRequestTopic {
			t := kmsg.NewCreateTopicsRequestTopic()
			t.Topic, t.NumPartitions, t.ReplicationFactor = name, 1, 1
			return t
		}),
		naming(produce, &produce.Topics, func(name string) kmsg.ProduceRequestTopic {
			t := kmsg.NewProduceRequestTopic()
			t.Topic = name
			t.Partitions = []kmsg.ProduceRequestTopicPartition{kmsg.NewProduceRequestTopicPartition()}
			return t
		}),
		naming(fetch, &fetch.Topics, func(name string) kmsg.FetchRequestTopic {
			t := kmsg.NewFetchRequestTopic()
			t.Topic = name
			t.Partitions = []kmsg.FetchRequestTopicPartition{kmsg.NewFetchRequestTopicPartition()}
			return t
		}),
		naming(offsets, &offsets.Groups, func(name string) kmsg.OffsetFetchRequestGroup {
			g := kmsg.NewOffsetFetchRequestGroup()
			g.Group = name
			return g
		}),
		naming(configs, &configs.Resources, func(name string) kmsg.DescribeConfigsRequestResource {
			r := kmsg.NewDescribeConfigsRequestResource()
			r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, name
			return r
		}),
	}
}

// notUTF8Seeds name a group with bytes that are not UTF-8, as a client may:
// its committed offset of topic "a" (mixedSeeds creates it) is a lag in
// /metrics, whose labels must be UTF-8.
func notUTF8Seeds() []kmsg.Request {
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.SetVersion(8) // the last to name topics rather than their ids
	commit.Group, commit.Generation = "a\xff", -1
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = "a"
	t.Partitions = []kmsg.OffsetCommitRequestTopicPartition{kmsg.NewOffsetCommitRequestTopicPartition()}
	commit.Topics = append(commit.Topics, t)
	return []kmsg.Request{commit}
}

// naming appends to entries, a list of req's, one entry made by entry for
// each of the names "a" and "d", and returns req.
func naming[E any](req kmsg.Request, entries *[]E, entry func(name string) E) kmsg.Request {
	for _, name := range []string{"a", "d"} {
		*entries = append(*entries, entry(name))
	}
	return req
}

// denyNamesStartingWithD denies every principal everything on topics, groups
// and transactional ids whose names start with "d", on the node at addr.
func denyNamesStartingWithD(f *testing.F, addr string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		f.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	acls := kadm.NewACLs().Deny("User:*").DenyHosts("*").ResourcePatternType(kadm.ACLPatternPrefixed).
		Topics("d").Groups("d").TransactionalIDs("d").Operations(kadm.OpAll)
	results, err := kadm.NewClient(cl).CreateACLs(ctx, acls)
	if err != nil {
		f.Fatal(err)
	}
	for _, r := range results {
		if r.Err != nil {
			f.Fatal(r.Err)
		}
	}
}

// panicRecorder is a slog handler that keeps the panics the request path
// logs and drops everything else.
type panicRecorder struct {
	mu     sync.Mutex
	panics []string
}

func (r *panicRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *panicRecorder) Handle(_ context.Context, rec slog.Record) error {
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
