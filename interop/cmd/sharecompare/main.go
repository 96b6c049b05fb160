// Command sharecompare sends the same share-group requests to a Kafka broker and a
// Strata broker and prints, case by case, the error codes and messages (and a few
// fields) each answers, marking the cases where they differ. It is how the expected
// values of Strata's share-group error tables were taken from Kafka 4.4.
//
// Both brokers must listen with SASL PLAIN, an ACL authorizer, a super user admin
// (password admin-secret) and a plain user alice (alice-secret); see
// interop/README.md ("Share-group errors against Kafka") for how to start them.
//
//	go run ./interop/cmd/sharecompare -kafka 127.0.0.1:9192 -strata 127.0.0.1:9292
//
// The exit status is 1 when any case differs.
package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/strata-stream/strata/interop/cmd/internal/sidebyside"
)

func main() {
	run := fmt.Sprintf("%06d", rand.IntN(1e6))
	sidebyside.Main("sharecompare", 5*time.Minute, func(ctx context.Context, addr string) ([]sidebyside.Result, error) {
		s, err := newSystem(ctx, addr, run)
		if err != nil {
			return nil, err
		}
		defer s.close()
		return s.runAll(ctx), nil
	})
}

// env is what the requests of one system need: its names and topic ids.
type env struct {
	run                      string
	topic, other             string // topic: 2 partitions, 10 records on 0; other: 1 partition
	topicID, otherID         [16]byte
	group, classic, aliceGrp string // alice's ACLs are on the prefix aliceGrp
}

type system struct {
	addr    string
	env     env
	clients map[string]*kgo.Client
	epochs  map[string]int32 // each share member's epoch (by group and member id), from its last heartbeat
	parts   map[string]int   // and how many partitions it was last assigned
}

func newSystem(ctx context.Context, addr, run string) (*system, error) {
	s := &system{addr: addr, clients: map[string]*kgo.Client{}, epochs: map[string]int32{}, parts: map[string]int{}}
	e := &s.env
	e.run = run
	e.topic, e.other = "sc-t-"+run, "sc-u-"+run
	e.group, e.classic, e.aliceGrp = "sc-g-"+run, "sc-c-"+run, "sc-alice-"+run
	adm := kadm.NewClient(s.client("admin", 99))
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, e.topic); err != nil {
		return nil, err
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, e.other); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		md, err := adm.Metadata(ctx, e.topic, e.other)
		if err == nil && md.Topics[e.topic].Err == nil && md.Topics[e.other].Err == nil && len(md.Topics[e.topic].Partitions) == 2 {
			e.topicID, e.otherID = md.Topics[e.topic].ID, md.Topics[e.other].ID
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("topics not ready: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(s.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
	if err != nil {
		return nil, err
	}
	s.clients["producer"] = prod
	for i := range 10 {
		r := &kgo.Record{Topic: e.topic, Partition: 0, Value: fmt.Appendf(nil, "v%02d", i)}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			return nil, fmt.Errorf("producing: %w", err)
		}
	}
	// Two classic groups with a committed offset each.
	for _, g := range []string{e.classic, e.classic + "-2"} {
		oc := kmsg.NewPtrOffsetCommitRequest()
		oc.Group, oc.Generation = g, -1
		ot := kmsg.NewOffsetCommitRequestTopic()
		ot.Topic = e.topic
		op := kmsg.NewOffsetCommitRequestTopicPartition()
		op.Offset = 1
		ot.Partitions = append(ot.Partitions, op)
		oc.Topics = append(oc.Topics, ot)
		if _, err := oc.RequestWith(ctx, prod); err != nil {
			return nil, fmt.Errorf("committing: %w", err)
		}
	}
	acls := kadm.NewACLs().Allow("User:alice").Groups(e.aliceGrp).
		Operations(kadm.OpRead, kadm.OpDescribe, kadm.OpDelete).ResourcePatternType(kadm.ACLPatternPrefixed)
	if _, err := adm.CreateACLs(ctx, acls); err != nil {
		return nil, fmt.Errorf("ACLs: %w", err)
	}
	acls = kadm.NewACLs().Allow("User:alice").Topics(e.other).
		Operations(kadm.OpRead, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	if _, err := adm.CreateACLs(ctx, acls); err != nil {
		return nil, fmt.Errorf("ACLs: %w", err)
	}
	// The share groups start at the earliest offset, so the first fetch acquires.
	ac := kmsg.NewPtrIncrementalAlterConfigsRequest()
	for _, g := range []string{e.group, e.aliceGrp} {
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, g
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
		r.Configs = append(r.Configs, c)
		ac.Resources = append(ac.Resources, r)
	}
	acResp, err := ac.RequestWith(ctx, prod)
	if err != nil {
		return nil, fmt.Errorf("group configs: %w", err)
	}
	for _, r := range acResp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return nil, fmt.Errorf("group config of %s: %w", r.ResourceName, err)
		}
	}
	if err := s.waitSetUp(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// waitSetUp waits until the broker itself shows alice's ACLs and the groups'
// configs: a controller has them before the broker applies them.
func (s *system) waitSetUp(ctx context.Context) error {
	e := &s.env
	adm := kadm.NewClient(s.client("admin", 99))
	return waitFor(ctx, 30*time.Second, "alice's ACLs and the group configs", func() error {
		acls, err := adm.DescribeACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts().AnyResource().
			Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
		if err != nil {
			return err
		}
		n := 0
		for _, r := range acls {
			if r.Err != nil {
				return r.Err
			}
			n += len(r.Described)
		}
		if n < 5 { // READ, DESCRIBE and DELETE on the groups, READ and DESCRIBE on the topic
			return fmt.Errorf("%d of alice's 5 ACLs", n)
		}
		for _, g := range []string{e.group, e.aliceGrp} {
			req := kmsg.NewPtrDescribeConfigsRequest()
			r := kmsg.NewDescribeConfigsRequestResource()
			r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, g
			r.ConfigNames = []string{"share.auto.offset.reset"}
			req.Resources = append(req.Resources, r)
			resp, err := req.RequestWith(ctx, s.clients["producer"])
			if err != nil {
				return err
			}
			if len(resp.Resources) != 1 || len(resp.Resources[0].Configs) != 1 ||
				resp.Resources[0].Configs[0].Value == nil || *resp.Resources[0].Configs[0].Value != "earliest" {
				return fmt.Errorf("group %s: share.auto.offset.reset not earliest yet", g)
			}
		}
		return nil
	})
}

// waitFor polls cond until it returns nil, for at most limit.
func waitFor(ctx context.Context, limit time.Duration, what string, cond func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// client is a client logged in as user, with ShareFetch and ShareAcknowledge
// capped at version maxShare.
func (s *system) client(user string, maxShare int16) *kgo.Client {
	key := fmt.Sprintf("%s/%d", user, maxShare)
	if cl := s.clients[key]; cl != nil {
		return cl
	}
	cl := s.newClient(user, maxShare)
	s.clients[key] = cl
	return cl
}

func (s *system) newClient(user string, maxShare int16) *kgo.Client {
	v := kversion.Stable()
	if maxShare < 99 {
		v.SetMaxKeyVersion(78, maxShare)
		v.SetMaxKeyVersion(79, maxShare)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.addr), kgo.MaxVersions(v),
		kgo.SASL(plain.Auth{User: user, Pass: user + "-secret"}.AsMechanism()),
		kgo.RetryTimeout(5*time.Second))
	if err != nil {
		panic(err)
	}
	return cl
}

func (s *system) close() {
	for _, cl := range s.clients {
		cl.Close()
	}
}

// step is one case of the script; both systems run the same steps in order.
// Most are one request (req); a few wait for a state (do). Nothing waits for a
// time, except after, which only ever makes a step later: a lower bound keeps
// the answer the same however slow the machine is.
type step struct {
	name     string
	user     string // "admin" when empty
	maxShare int16  // 0: latest
	req      func(e *env) kmsg.Request
	// own sends req on a connection of its own, given up after ownTimeout: a
	// request a broker never answers must not leave the next step a dead
	// connection.
	own bool
	// after makes the step wait at least this long after the previous answer.
	after time.Duration
	do    func(ctx context.Context, s *system) string
}

// ownTimeout bounds a step sent on its own connection.
const ownTimeout = 5 * time.Second

func (s *system) runAll(ctx context.Context) []sidebyside.Result {
	var out []sidebyside.Result
	for _, st := range steps() {
		time.Sleep(st.after)
		if st.do != nil {
			out = append(out, sidebyside.Result{Name: st.name, Out: st.do(ctx, s)})
			continue
		}
		user := st.user
		if user == "" {
			user = "admin"
		}
		maxShare := st.maxShare
		if maxShare == 0 {
			maxShare = 99
		}
		req := st.req(&s.env)
		resp, err := s.send(ctx, user, maxShare, st.own, req)
		if err != nil {
			out = append(out, sidebyside.Result{Name: st.name, Out: "error: " + errText(err)})
			continue
		}
		out = append(out, sidebyside.Result{Name: st.name, Out: fmt.Sprintf("v%d %s", req.GetVersion(), flatten(resp, &s.env))})
	}
	return out
}

// send sends req as sent (no sharding by kgo) as user, and notes the member
// epoch a successful ShareGroupHeartbeat answers.
func (s *system) send(ctx context.Context, user string, maxShare int16, own bool, req kmsg.Request) (kmsg.Response, error) {
	cl, timeout := s.client(user, maxShare), 15*time.Second
	if own {
		cl, timeout = s.newClient(user, maxShare), ownTimeout
		defer cl.Close()
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(rctx, req)
	if err != nil {
		return nil, err
	}
	if hb, ok := req.(*kmsg.ShareGroupHeartbeatRequest); ok {
		if r := resp.(*kmsg.ShareGroupHeartbeatResponse); r.ErrorCode == 0 {
			key := hb.GroupID + "/" + hb.MemberID
			s.epochs[key] = r.MemberEpoch
			if r.Assignment != nil {
				s.parts[key] = assigned(r)
			}
		}
	}
	return resp, nil
}

var addrs = regexp.MustCompile(`[0-9.]+:[0-9]+`)

// errText is err without what changes from run to run (addresses, ports).
func errText(err error) string {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return "no answer in time"
	}
	return addrs.ReplaceAllString(err.Error(), "<addr>")
}

// shown are the response fields compared besides error codes and messages.
var shown = []string{"MemberEpoch", "StartOffset", "Lag", "GroupState", "AuthorizedOperations", "AcquiredRecords",
	"LeaderEpoch", "StateEpoch", "DeliveryCompleteCount"}

// flatten renders the error codes, messages and shown fields of a response, in
// field order, with names of this system's topics and groups made generic.
func flatten(resp kmsg.Response, e *env) string {
	var parts []string
	var walk func(path string, v reflect.Value)
	walk = func(path string, v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(path, v.Elem())
			}
		case reflect.Slice:
			if v.Type().Elem().Kind() == reflect.Uint8 {
				return
			}
			if v.Type().Name() == "" && v.Type().Elem().Kind() == reflect.Struct && v.Type().Elem().Name() == "ShareFetchResponseTopicPartitionAcquiredRecord" {
				parts = append(parts, fmt.Sprintf("%sAcquired=%d", path, v.Len()))
				return
			}
			for i := range v.Len() {
				walk(fmt.Sprintf("%s[%d]", path, i), v.Index(i))
			}
		case reflect.Struct:
			for i := range v.NumField() {
				f := v.Type().Field(i)
				fv := v.Field(i)
				name := f.Name
				switch {
				case strings.HasSuffix(name, "ErrorCode"):
					if c := fv.Int(); c != 0 {
						parts = append(parts, fmt.Sprintf("%s.%s=%s", path, name, kerr.ErrorForCode(int16(c)).(*kerr.Error).Message))
					}
				case strings.HasSuffix(name, "ErrorMessage"):
					if fv.Kind() == reflect.Pointer && !fv.IsNil() {
						parts = append(parts, fmt.Sprintf("%s.%s=%q", path, name, generic(fv.Elem().String(), e)))
					} else if fv.Kind() == reflect.String && fv.String() != "" {
						parts = append(parts, fmt.Sprintf("%s.%s=%q", path, name, generic(fv.String(), e)))
					}
				case slices.Contains(shown, name):
					parts = append(parts, fmt.Sprintf("%s.%s=%v", path, name, fv.Interface()))
				case name == "Records" || name == "UnknownTags":
				case fv.Kind() == reflect.Slice || fv.Kind() == reflect.Struct || fv.Kind() == reflect.Pointer:
					if name == "AcquiredRecords" {
						continue
					}
					walk(path+"."+name, fv)
				}
			}
		}
	}
	if d, ok := resp.(*kmsg.ShareGroupDescribeResponse); ok {
		// Kafka lists a group's members in no order (a hash map's); a set.
		for _, g := range d.Groups {
			slices.SortFunc(g.Members, func(a, b kmsg.ShareGroupDescribeResponseGroupMember) int {
				return strings.Compare(a.MemberID, b.MemberID)
			})
		}
	}
	walk("", reflect.ValueOf(resp))
	if hb, ok := resp.(*kmsg.ShareGroupHeartbeatResponse); ok && hb.Assignment != nil {
		parts = append(parts, fmt.Sprintf("assigned=%d", assigned(hb)))
	}
	return strings.Join(parts, " ")
}

// assigned counts the partitions a heartbeat's assignment names.
func assigned(r *kmsg.ShareGroupHeartbeatResponse) int {
	n := 0
	for _, t := range r.Assignment.TopicPartitions {
		n += len(t.Partitions)
	}
	return n
}

// generic replaces this run's names in a message with placeholders.
func generic(msg string, e *env) string {
	r := strings.NewReplacer(e.topic, "<topic>", e.other, "<other>", e.group, "<group>",
		e.classic, "<classic>", e.aliceGrp, "<alicegroup>", e.run, "<run>")
	return r.Replace(msg)
}
