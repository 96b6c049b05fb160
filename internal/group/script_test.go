package group

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/*.txt with the actual output")

// TestScripts runs the scripts in testdata/*.txt. A script is a list of commands
// ("> cmd args...") each followed by the output it must produce; "#" lines are
// comments. Every script runs in a synctest bubble: time only moves with "advance",
// and after each command the harness waits until every goroutine is blocked, so the
// output is deterministic. Requests run in their own goroutines; one that has not
// answered yet prints "pending" and its answer appears after the command that
// completes it. Generated member ids print as $m1, $m2... in order of appearance.
// Run with -rewrite to regenerate the expected output.
//
// Commands (key=value arguments; ids may be written $mN):
//
//	config delay=DUR retention=DUR check=DUR min-session=DUR migration=POLICY
//	       consumer-max=N classic-max=N assignment-interval=DUR (first command only)
//	join NAME group= [member=] [client=] [instance=] [type=consumer]
//	     [protocols=range:t1+t2,roundrobin:t1] [owned=t1/0+1;t2/0] [session=10s]
//	     [rebalance=DUR] [v=9]
//	sync NAME group= member= gen= [instance=] [assign=$m1:a,$m2:{t1/0+1;t2/0}] [type=]
//	     [proto=] [v=5]                          ({...}: a consumer protocol assignment)
//	heartbeat NAME group= member= gen= [instance=] [v=4]
//	leave NAME group= members=$m1,~instance [v=5]      (v<=2: the first member only)
//	commit NAME group= [gen=-1] [member=] [instance=] offsets=t/0=5:meta@epoch,...
//	       [retention=DUR] [v=9]
//	fetch NAME group= [topics=t/0+1,u/2] [member= epoch=] [v=7]  (no topics: all offsets)
//	describe NAME groups=g1,g2 [ops] [v=5]
//	list NAME [states=Stable,Empty] [types=classic] [v=5]
//	delete NAME groups=g1,g2
//	offsetdelete NAME group= offsets=t/0,t/1
//	lag NAME group= hwm=t/0=10,t/1=3
//	advance DUR | wait | log | reload | unload group= | load group= | topicsdeleted topics=t1,t2
//	store fail=unavailable|notcoord|toolarge|none | store block | store unblock
//
// and the KIP-848 commands of consumer_script_test.go (topics, cghb, cgdescribe)
// and the KIP-1071 ones of streams_script_test.go (sthb, stdescribe).
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runScript(t, f) })
		})
	}
}

// scriptStep is one command of a script with the comments before it and its
// expected output.
type scriptStep struct {
	comments []string
	cmd      string
	want     []string
}

func parseScript(t *testing.T, path string) (steps []scriptStep, trailing []string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var comments []string
	for line := range strings.Lines(string(data)) {
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "> "):
			steps = append(steps, scriptStep{comments: comments, cmd: strings.TrimSpace(line[2:])})
			comments = nil
		case line == "" || strings.HasPrefix(line, "#"):
			comments = append(comments, line)
		case len(steps) == 0:
			t.Fatalf("%s: output before the first command: %q", path, line)
		default:
			// Blank/comment lines between output lines belong to the next step.
			if len(comments) > 0 {
				t.Fatalf("%s: output %q after a comment; put comments before commands", path, line)
			}
			s := &steps[len(steps)-1]
			s.want = append(s.want, line)
		}
	}
	return steps, comments
}

func runScript(t *testing.T, path string) {
	steps, trailing := parseScript(t, path)
	h := newHarness(t)
	defer h.close()
	var rewritten strings.Builder
	failed := false
	for i, s := range steps {
		got := h.run(s.cmd)
		for _, c := range s.comments {
			rewritten.WriteString(c + "\n")
		}
		rewritten.WriteString("> " + s.cmd + "\n")
		for _, l := range got {
			rewritten.WriteString(l + "\n")
		}
		if !*rewrite && !slices.Equal(got, s.want) && !failed {
			failed = true
			t.Errorf("%s: step %d %q:\n--- want\n%s\n--- got\n%s", path, i+1, s.cmd,
				strings.Join(s.want, "\n"), strings.Join(got, "\n"))
		}
	}
	for _, c := range trailing {
		rewritten.WriteString(c + "\n")
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(rewritten.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// scriptOp is a request running in its own goroutine.
type scriptOp struct {
	name   string
	done   chan struct{}
	format func() []string // formats the response; runs on the test goroutine
}

type harness struct {
	t       *testing.T
	cfg     Config
	store   *memStore
	c       *Coordinator
	ops     map[string]*scriptOp
	alias   map[string]string // real member id -> $mN
	real    map[string]string // $mN -> real member id
	logSeen map[int32]int     // records already shown by "log"
	topics  *fakeTopics       // the topic catalog (consumer_script_test.go)
	// groupConfigs are the groups' own configs ("groupconfig"), read by the
	// coordinator's goroutines.
	groupConfigs struct {
		sync.Mutex
		m map[string]ConsumerGroupConfig
	}
}

func newHarness(t *testing.T) *harness {
	cfg := DefaultConfig()
	cfg.GroupInitialRebalanceDelay = 0
	// Consumer group targets at every epoch unless a script sets an interval
	// (time stands still between a script's steps).
	cfg.ConsumerAssignmentInterval = -1
	topics := newFakeTopics()
	cfg.Topics = topics
	h := &harness{
		t: t, cfg: cfg, store: newMemStore(), ops: make(map[string]*scriptOp),
		alias: make(map[string]string), real: make(map[string]string), logSeen: make(map[int32]int),
		topics: topics,
	}
	h.cfg.GroupConfig = func(group string) ConsumerGroupConfig {
		h.groupConfigs.Lock()
		defer h.groupConfigs.Unlock()
		return h.groupConfigs.m[group]
	}
	return h
}

// coord returns the coordinator, starting it (all partitions loaded) on first use.
func (h *harness) coord() *Coordinator {
	if h.c == nil {
		h.c = New(h.cfg, h.store, nil)
		if err := loadAll(context.Background(), h.c, h.store); err != nil {
			h.t.Fatal(err)
		}
	}
	return h.c
}

func (h *harness) close() {
	if h.c != nil {
		h.c.Close()
	}
	synctest.Wait()
	for _, op := range h.ops {
		<-op.done
	}
}

// id resolves a member id argument.
func (h *harness) id(s string) string {
	if strings.HasPrefix(s, "$") {
		r, ok := h.real[s]
		if !ok {
			h.t.Fatalf("unknown member alias %s", s)
		}
		return r
	}
	return s
}

// name prints a member id: generated ids get aliases, literal ones stay.
func (h *harness) name(id string) string {
	if id == "" {
		return `""`
	}
	if a, ok := h.alias[id]; ok {
		return a
	}
	if !strings.Contains(id, "-") || len(id) < 36 {
		return id
	}
	a := fmt.Sprintf("$m%d", len(h.real)+1)
	h.alias[id], h.real[a] = a, id
	return a
}

type args map[string]string

func parseArgs(fields []string) args {
	a := args{}
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		a[k] = v
	}
	return a
}

func (a args) int(k string, def int64) int64 {
	v, ok := a[k]
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		panic(fmt.Sprintf("bad %s=%q", k, v))
	}
	return n
}

func (a args) dur(k string, def time.Duration) time.Duration {
	v, ok := a[k]
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		panic(fmt.Sprintf("bad %s=%q", k, v))
	}
	return d
}

func (a args) str(k, def string) string {
	if v, ok := a[k]; ok {
		return v
	}
	return def
}

func (a args) optional(k string) *string {
	if v, ok := a[k]; ok {
		return &v
	}
	return nil
}

func (a args) list(k string) []string {
	v, ok := a[k]
	if !ok || v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

func errName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &ke) {
		return ke.Message
	}
	return strconv.Itoa(int(code))
}

// run executes one command and returns its output plus that of requests it completed.
func (h *harness) run(cmd string) []string {
	fields := strings.Fields(cmd)
	verb, rest := fields[0], fields[1:]
	var out []string
	switch verb {
	case "config":
		if h.c != nil {
			h.t.Fatal("config after the coordinator started")
		}
		a := parseArgs(rest)
		h.cfg.GroupInitialRebalanceDelay = a.dur("delay", h.cfg.GroupInitialRebalanceDelay)
		h.cfg.OffsetsRetention = a.dur("retention", h.cfg.OffsetsRetention)
		h.cfg.OffsetsRetentionCheckInterval = a.dur("check", h.cfg.OffsetsRetentionCheckInterval)
		h.cfg.MinSessionTimeout = a.dur("min-session", h.cfg.MinSessionTimeout)
		h.cfg.MigrationPolicy = MigrationPolicy(a.str("migration", string(h.cfg.MigrationPolicy)))
		h.cfg.ConsumerMaxSize = int(a.int("consumer-max", int64(h.cfg.ConsumerMaxSize)))
		h.cfg.ClassicMaxSize = int(a.int("classic-max", int64(h.cfg.ClassicMaxSize)))
		h.cfg.ConsumerAssignmentInterval = a.dur("assignment-interval", h.cfg.ConsumerAssignmentInterval)
	case "groupconfig": // groupconfig GROUP [session=D] [interval=D] [streams-session=D] [streams-interval=D] [share-session=D] [share-interval=D] [standbys=N] [warmups=N] [lag=N] [racktags=k1+k2]: the group's own configs
		a := parseArgs(rest[1:])
		h.groupConfigs.Lock()
		if h.groupConfigs.m == nil {
			h.groupConfigs.m = map[string]ConsumerGroupConfig{}
		}
		c := ConsumerGroupConfig{SessionTimeout: a.dur("session", 0), HeartbeatInterval: a.dur("interval", 0),
			StreamsSessionTimeout: a.dur("streams-session", 0), StreamsHeartbeatInterval: a.dur("streams-interval", 0),
			ShareSessionTimeout: a.dur("share-session", 0), ShareHeartbeatInterval: a.dur("share-interval", 0),
			StreamsStandbyReplicas: int(a.int("standbys", 0)), StreamsWarmupReplicas: int(a.int("warmups", 0)),
			StreamsAcceptableRecoveryLag: a.int("lag", 0)}
		if t := a.str("racktags", ""); t != "" {
			c.StreamsRackAwareTags = strings.Split(t, "+")
		}
		h.groupConfigs.m[rest[0]] = c
		h.groupConfigs.Unlock()
	case "advance":
		time.Sleep(mustDur(rest[0]))
	case "wait":
	case "log":
		out = h.log()
	case "reload":
		c := h.coord()
		c.Close()
		synctest.Wait()
		h.c = nil
		h.coord()
	case "topicsdeleted":
		h.coord().TopicsDeleted(strings.Split(parseArgs(rest).str("topics", ""), ",")...)
	case "unload":
		g := parseArgs(rest).str("group", "")
		h.coord().UnloadPartition(PartitionFor(g, h.cfg.OffsetsTopicPartitions))
	case "load":
		g := parseArgs(rest).str("group", "")
		p := PartitionFor(g, h.cfg.OffsetsTopicPartitions)
		if err := h.coord().LoadPartitionAt(context.Background(), p, 0, h.store.records(p)); err != nil {
			out = append(out, "load: "+err.Error())
		}
	case "store":
		switch rest[0] {
		case "fail=unavailable":
			h.store.setFail(errors.New("not enough replicas"))
		case "fail=notcoord":
			h.store.setFail(fmt.Errorf("lost leadership: %w", ErrNotCoordinator))
		case "fail=toolarge":
			h.store.setFail(fmt.Errorf("batch: %w", ErrRecordTooLarge))
		case "fail=none":
			h.store.setFail(nil)
		case "block":
			h.store.setBlock()
		case "unblock":
			h.store.unblock()
		default:
			h.t.Fatalf("bad store command %q", cmd)
		}
	default:
		out = h.request(verb, rest[0], parseArgs(rest[1:]))
	}
	synctest.Wait()
	return append(out, h.completed()...)
}

func mustDur(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}

// request starts a request in its own goroutine.
func (h *harness) request(verb, name string, a args) []string {
	if _, dup := h.ops[name]; dup {
		h.t.Fatalf("request name %s still in use", name)
	}
	c := h.coord()
	run, ok := h.requestFunc(verb, a)
	if !ok {
		h.t.Fatalf("unknown command %q", verb)
	}
	op := &scriptOp{name: name, done: make(chan struct{})}
	h.ops[name] = op
	go func() {
		defer close(op.done)
		op.format = run(c)
	}()
	synctest.Wait()
	select {
	case <-op.done:
		return nil // printed by completed
	default:
		return []string{name + ": pending"}
	}
}

// completed prints, in name order, the requests that answered since the last call.
func (h *harness) completed() []string {
	var names []string
	for n, op := range h.ops {
		select {
		case <-op.done:
			names = append(names, n)
		default:
		}
	}
	slices.Sort(names)
	var out []string
	for _, n := range names {
		lines := h.ops[n].format()
		delete(h.ops, n)
		if len(lines) == 0 {
			continue
		}
		out = append(out, n+": "+lines[0])
		for _, l := range lines[1:] {
			out = append(out, "  "+l)
		}
	}
	return out
}

// requestFunc builds the request of a command. The returned function sends it and
// returns the response's formatter.
func (h *harness) requestFunc(verb string, a args) (func(*Coordinator) func() []string, bool) {
	ctx := WithClient(context.Background(), Client{ID: a.str("client", "client"), Host: a.str("host", "/127.0.0.1")})
	switch verb {
	case "join":
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version = int16(a.int("v", 9))
		req.Group = a.str("group", "")
		req.MemberID = h.id(a.str("member", ""))
		req.InstanceID = a.optional("instance")
		req.ProtocolType = a.str("type", "consumer")
		req.SessionTimeoutMillis = int32(a.dur("session", 10*time.Second).Milliseconds())
		req.RebalanceTimeoutMillis = int32(a.dur("rebalance", 10*time.Second).Milliseconds())
		for _, p := range a.list("protocols") {
			name, topics, _ := strings.Cut(p, ":")
			meta := kmsg.ConsumerMemberMetadata{Topics: strings.Split(topics, "+")}
			if o, ok := a["owned"]; ok {
				// Owned partitions (subscription v1): owned=t1/0+1;t2/0, "-" for none.
				meta.Version = 1
				meta.OwnedPartitions = []kmsg.ConsumerMemberMetadataOwnedPartition{}
				for _, t := range strings.Split(o, ";") {
					if t == "-" {
						continue
					}
					topic, parts, _ := strings.Cut(t, "/")
					op := kmsg.ConsumerMemberMetadataOwnedPartition{Topic: topic}
					for _, p := range strings.Split(parts, "+") {
						op.Partitions = append(op.Partitions, int32(mustInt(p)))
					}
					meta.OwnedPartitions = append(meta.OwnedPartitions, op)
				}
			}
			req.Protocols = append(req.Protocols, kmsg.JoinGroupRequestProtocol{Name: name, Metadata: meta.AppendTo(nil)})
		}
		return func(c *Coordinator) func() []string {
			resp := c.JoinGroup(ctx, req)
			return func() []string { return h.fmtJoin(resp) }
		}, true
	case "sync":
		req := kmsg.NewPtrSyncGroupRequest()
		req.Version = int16(a.int("v", 5))
		req.Group = a.str("group", "")
		req.MemberID = h.id(a.str("member", ""))
		req.Generation = int32(a.int("gen", -1))
		req.InstanceID = a.optional("instance")
		req.ProtocolType = a.optional("type")
		req.Protocol = a.optional("proto")
		for _, as := range a.list("assign") {
			m, v, _ := strings.Cut(as, ":")
			b := []byte(v)
			if inner, ok := strings.CutPrefix(v, "{"); ok {
				// A consumer protocol assignment: {t1/0+1;t2/0}.
				var ca kmsg.ConsumerMemberAssignment
				for _, t := range strings.Split(strings.TrimSuffix(inner, "}"), ";") {
					topic, parts, _ := strings.Cut(t, "/")
					at := kmsg.ConsumerMemberAssignmentTopic{Topic: topic}
					for _, p := range strings.Split(parts, "+") {
						at.Partitions = append(at.Partitions, int32(mustInt(p)))
					}
					ca.Topics = append(ca.Topics, at)
				}
				b = ca.AppendTo(nil)
			}
			req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: h.id(m), MemberAssignment: b})
		}
		return func(c *Coordinator) func() []string {
			resp := c.SyncGroup(ctx, req)
			return func() []string {
				s := errName(resp.ErrorCode)
				if resp.ErrorCode == 0 {
					s += " assignment=" + fmtClassicAssignment(resp.MemberAssignment)
					if resp.Protocol != nil && req.Version >= 5 {
						s += " proto=" + *resp.Protocol
					}
				}
				return []string{s}
			}
		}, true
	case "heartbeat":
		req := kmsg.NewPtrHeartbeatRequest()
		req.Version = int16(a.int("v", 4))
		req.Group = a.str("group", "")
		req.MemberID = h.id(a.str("member", ""))
		req.Generation = int32(a.int("gen", -1))
		req.InstanceID = a.optional("instance")
		return func(c *Coordinator) func() []string {
			code := c.Heartbeat(ctx, req).ErrorCode
			return func() []string { return []string{errName(code)} }
		}, true
	case "leave":
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Version = int16(a.int("v", 5))
		req.Group = a.str("group", "")
		for _, m := range a.list("members") {
			lm := kmsg.NewLeaveGroupRequestMember()
			if inst, ok := strings.CutPrefix(m, "~"); ok {
				lm.InstanceID = &inst
			} else {
				lm.MemberID = h.id(m)
			}
			req.Members = append(req.Members, lm)
		}
		if req.Version <= 2 && len(req.Members) > 0 {
			req.MemberID, req.Members = req.Members[0].MemberID, nil
		}
		return func(c *Coordinator) func() []string {
			resp := c.LeaveGroup(ctx, req)
			return func() []string {
				s := errName(resp.ErrorCode)
				for _, m := range resp.Members {
					who := h.name(m.MemberID)
					if m.MemberID == "" {
						who = "~" + deref(m.InstanceID)
					}
					s += " " + who + "=" + errName(m.ErrorCode)
				}
				return []string{s}
			}
		}, true
	case "commit":
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = int16(a.int("v", 9))
		req.Group = a.str("group", "")
		req.Generation = int32(a.int("gen", -1))
		req.MemberID = h.id(a.str("member", ""))
		req.InstanceID = a.optional("instance")
		if r, ok := a["retention"]; ok {
			req.RetentionTimeMillis = mustDur(r).Milliseconds()
		}
		for _, o := range a.list("offsets") {
			tp, val, _ := strings.Cut(o, "=")
			topic, part, _ := strings.Cut(tp, "/")
			val, epoch, hasEpoch := strings.Cut(val, "@")
			off, meta, hasMeta := strings.Cut(val, ":")
			p := kmsg.NewOffsetCommitRequestTopicPartition()
			p.Partition = int32(mustInt(part))
			p.Offset = mustInt(off)
			if hasMeta {
				if meta == "BIG" {
					meta = strings.Repeat("x", 4097)
				}
				p.Metadata = &meta
			}
			if hasEpoch {
				p.LeaderEpoch = int32(mustInt(epoch))
			}
			if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != topic {
				rt := kmsg.NewOffsetCommitRequestTopic()
				rt.Topic = topic
				req.Topics = append(req.Topics, rt)
			}
			req.Topics[len(req.Topics)-1].Partitions = append(req.Topics[len(req.Topics)-1].Partitions, p)
		}
		return func(c *Coordinator) func() []string {
			resp := c.OffsetCommit(ctx, req)
			return func() []string {
				var parts []string
				for _, t := range resp.Topics {
					for _, p := range t.Partitions {
						parts = append(parts, fmt.Sprintf("%s/%d=%s", t.Topic, p.Partition, errName(p.ErrorCode)))
					}
				}
				return []string{strings.Join(parts, " ")}
			}
		}, true
	case "fetch":
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = int16(a.int("v", 7))
		topics := fetchTopics(a)
		if req.Version >= 8 {
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = a.str("group", "")
			if m, ok := a["member"]; ok {
				rg.MemberID = ptr(h.id(m))
			}
			rg.MemberEpoch = int32(a.int("epoch", -1))
			for _, t := range topics {
				rg.Topics = append(rg.Topics, kmsg.OffsetFetchRequestGroupTopic{Topic: t.Topic, Partitions: t.Partitions})
			}
			req.Groups = append(req.Groups, rg)
		} else {
			req.Group = a.str("group", "")
			req.Topics = topics
		}
		return func(c *Coordinator) func() []string {
			resp := c.OffsetFetch(ctx, req)
			return func() []string {
				if req.Version >= 8 {
					g := resp.Groups[0]
					s := errName(g.ErrorCode)
					for _, t := range g.Topics {
						for _, p := range t.Partitions {
							s += fmtFetched(t.Topic, p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode)
						}
					}
					return []string{s}
				}
				s := errName(resp.ErrorCode)
				for _, t := range resp.Topics {
					for _, p := range t.Partitions {
						s += fmtFetched(t.Topic, p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode)
					}
				}
				return []string{s}
			}
		}, true
	case "describe":
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Version = int16(a.int("v", 5))
		req.Groups = a.list("groups")
		_, req.IncludeAuthorizedOperations = a["ops"]
		return func(c *Coordinator) func() []string {
			resp := c.DescribeGroups(ctx, req)
			return func() []string { return h.fmtDescribe(resp) }
		}, true
	case "list":
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = int16(a.int("v", 5))
		req.StatesFilter = a.list("states")
		req.TypesFilter = a.list("types")
		return func(c *Coordinator) func() []string {
			resp := c.ListGroups(ctx, req)
			return func() []string {
				out := []string{errName(resp.ErrorCode)}
				for _, g := range resp.Groups {
					out = append(out, fmt.Sprintf("%s type=%q state=%s group-type=%s", g.Group, g.ProtocolType, g.GroupState, g.GroupType))
				}
				return out
			}
		}, true
	case "delete":
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Version = 2
		req.Groups = a.list("groups")
		return func(c *Coordinator) func() []string {
			resp := c.DeleteGroups(ctx, req)
			return func() []string {
				var parts []string
				for _, g := range resp.Groups {
					parts = append(parts, g.Group+"="+errName(g.ErrorCode))
				}
				return []string{strings.Join(parts, " ")}
			}
		}, true
	case "offsetdelete":
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = a.str("group", "")
		for _, o := range a.list("offsets") {
			topic, part, _ := strings.Cut(o, "/")
			if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != topic {
				req.Topics = append(req.Topics, kmsg.OffsetDeleteRequestTopic{Topic: topic})
			}
			t := &req.Topics[len(req.Topics)-1]
			t.Partitions = append(t.Partitions, kmsg.OffsetDeleteRequestTopicPartition{Partition: int32(mustInt(part))})
		}
		return func(c *Coordinator) func() []string {
			resp := c.OffsetDelete(ctx, req)
			return func() []string {
				s := errName(resp.ErrorCode)
				for _, t := range resp.Topics {
					for _, p := range t.Partitions {
						s += fmt.Sprintf(" %s/%d=%s", t.Topic, p.Partition, errName(p.ErrorCode))
					}
				}
				return []string{s}
			}
		}, true
	case "lag":
		hwm := map[topicPartition]int64{}
		for _, o := range a.list("hwm") {
			tp, v, _ := strings.Cut(o, "=")
			topic, part, _ := strings.Cut(tp, "/")
			hwm[topicPartition{topic, int32(mustInt(part))}] = mustInt(v)
		}
		group := a.str("group", "")
		return func(c *Coordinator) func() []string {
			ls, err := c.Lag(func(topic string, p int32) (int64, bool) {
				v, ok := hwm[topicPartition{topic, p}]
				return v, ok
			}, group)
			return func() []string {
				if err != nil {
					return []string{err.Error()}
				}
				var parts []string
				for _, l := range ls {
					parts = append(parts, fmt.Sprintf("%s/%d committed=%d hwm=%d lag=%d", l.Topic, l.Partition, l.Committed, l.HighWatermark, l.Lag))
				}
				if len(parts) == 0 {
					parts = []string{"no offsets"}
				}
				return []string{strings.Join(parts, " ")}
			}
		}, true
	}
	return h.consumerRequestFunc(verb, a)
}

func mustInt(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		panic(err)
	}
	return n
}

// fetchTopics parses topics=t/0+1,u/2; nil (all topics) when absent.
func fetchTopics(a args) []kmsg.OffsetFetchRequestTopic {
	v, ok := a["topics"]
	if !ok {
		return nil
	}
	topics := []kmsg.OffsetFetchRequestTopic{}
	for _, t := range strings.Split(v, ",") {
		name, parts, _ := strings.Cut(t, "/")
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic = name
		for _, p := range strings.Split(parts, "+") {
			rt.Partitions = append(rt.Partitions, int32(mustInt(p)))
		}
		topics = append(topics, rt)
	}
	return topics
}

func fmtFetched(topic string, p int32, off int64, epoch int32, meta *string, code int16) string {
	s := fmt.Sprintf(" %s/%d=%d", topic, p, off)
	if epoch >= 0 {
		s += fmt.Sprintf("@%d", epoch)
	}
	if m := deref(meta); m != "" {
		s += fmt.Sprintf(":%q", m)
	}
	if code != 0 {
		s += "(" + errName(code) + ")"
	}
	return s
}

// fmtClassicAssignment shows a consumer protocol assignment as {t1/0+1;t2/0}; other bytes
// are quoted.
func fmtClassicAssignment(b []byte) string {
	var a kmsg.ConsumerMemberAssignment
	if len(b) < 6 || a.ReadFrom(b) != nil || !bytes.Equal(a.AppendTo(nil), b) {
		return fmt.Sprintf("%q", b)
	}
	var ts []string
	for _, t := range a.Topics {
		ps := make([]string, len(t.Partitions))
		for i, p := range t.Partitions {
			ps[i] = strconv.Itoa(int(p))
		}
		ts = append(ts, t.Topic+"/"+strings.Join(ps, "+"))
	}
	return "{" + strings.Join(ts, ";") + "}"
}

// fmtMeta shows consumer protocol metadata as its topics joined by "+".
func fmtMeta(b []byte) string {
	var m kmsg.ConsumerMemberMetadata
	if err := m.ReadFrom(b); err != nil {
		return fmt.Sprintf("%q", b)
	}
	return strings.Join(m.Topics, "+")
}

func (h *harness) fmtJoin(resp *kmsg.JoinGroupResponse) []string {
	s := errName(resp.ErrorCode)
	if resp.ErrorCode != 0 {
		return []string{s + " member=" + h.name(resp.MemberID)}
	}
	s += fmt.Sprintf(" gen=%d proto=%s leader=%s member=%s", resp.Generation, deref(resp.Protocol), h.name(resp.LeaderID), h.name(resp.MemberID))
	if resp.SkipAssignment {
		s += " skip-assignment"
	}
	if len(resp.Members) > 0 {
		var ms []string
		for _, m := range resp.Members {
			x := h.name(m.MemberID)
			if m.InstanceID != nil {
				x += "(" + *m.InstanceID + ")"
			}
			ms = append(ms, x+":"+fmtMeta(m.ProtocolMetadata))
		}
		s += " members=[" + strings.Join(ms, " ") + "]"
	}
	return []string{s}
}

func (h *harness) fmtDescribe(resp *kmsg.DescribeGroupsResponse) []string {
	var out []string
	for _, g := range resp.Groups {
		s := fmt.Sprintf("%s %s state=%s type=%q proto=%q", g.Group, errName(g.ErrorCode), g.State, g.ProtocolType, g.Protocol)
		if g.AuthorizedOperations != kmsg.NewDescribeGroupsResponseGroup().AuthorizedOperations {
			s += fmt.Sprintf(" ops=%d", g.AuthorizedOperations)
		}
		out = append(out, s)
		for _, m := range g.Members {
			x := "  " + h.name(m.MemberID)
			if m.InstanceID != nil {
				x += " instance=" + *m.InstanceID
			}
			x += fmt.Sprintf(" client=%s host=%s", m.ClientID, m.ClientHost)
			if len(m.ProtocolMetadata) > 0 {
				x += " meta=" + fmtMeta(m.ProtocolMetadata)
			}
			if len(m.MemberAssignment) > 0 {
				x += " assignment=" + fmtClassicAssignment(m.MemberAssignment)
			}
			out = append(out, x)
		}
	}
	return out
}

// log prints the records appended since the last "log", per partition.
func (h *harness) log() []string {
	var out []string
	start := time.Now().Truncate(24 * time.Hour) // synctest's epoch is midnight
	for p := range h.cfg.OffsetsTopicPartitions {
		recs := h.store.log(p)
		for _, r := range recs[h.logSeen[p]:] {
			out = append(out, fmt.Sprintf("p%d %s", p, h.fmtRecord(r, start)))
		}
		h.logSeen[p] = len(recs)
	}
	return out
}

func (h *harness) fmtRecord(r Record, start time.Time) string {
	k, err := decodeKey(r.Key)
	if err != nil {
		return "bad key: " + err.Error()
	}
	switch k.kind {
	case kindOffset:
		s := fmt.Sprintf("offset %s %s/%d", k.group, k.tp.topic, k.tp.partition)
		if r.Value == nil {
			return s + " tombstone"
		}
		o, err := decodeOffsetValue(r.Value)
		if err != nil {
			return s + " bad value: " + err.Error()
		}
		s += fmt.Sprintf(" = %d epoch=%d meta=%q at=%v", o.offset, o.leaderEpoch, o.metadata, o.commitTime.Sub(start))
		if !o.expireTime.IsZero() {
			s += fmt.Sprintf(" expire=%v", o.expireTime.Sub(start))
		}
		return s
	case kindGroup:
		s := "group " + k.group
		if r.Value == nil {
			return s + " tombstone"
		}
		v, err := decodeGroupValue(r.Value)
		if err != nil {
			return s + " bad value: " + err.Error()
		}
		s += fmt.Sprintf(" gen=%d type=%q proto=%q leader=%s at=%v", v.Generation, v.ProtocolType, deref(v.Protocol),
			h.name(deref(v.Leader)), time.UnixMilli(v.CurrentStateTimestamp).Sub(start))
		var ms []string
		for _, m := range v.Members {
			x := h.name(m.MemberID)
			if m.InstanceID != nil {
				x += "(" + *m.InstanceID + ")"
			}
			ms = append(ms, fmt.Sprintf("%s:%s:%s", x, fmtMeta(m.Subscription), fmtClassicAssignment(m.Assignment)))
		}
		return s + " members=[" + strings.Join(ms, " ") + "]"
	case kindStreams:
		return h.fmtStreamsRecord(k, r.Value)
	case kindShare:
		return h.fmtShareRecord(k, r.Value)
	case kindConsumer:
		return h.fmtConsumerRecord(k, r.Value)
	}
	return "unknown key"
}
