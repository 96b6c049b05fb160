// Command topicidcompare sends the same topic-id requests (Produce v13,
// OffsetCommit v10, OffsetFetch v10, TxnOffsetCommit v6: KIP-516's topic ids,
// KIP-848 and KIP-1319) to a Kafka broker and a Strata broker and prints, case
// by case, what each answers: each topic's id (named by the case's topics: a,
// b, d for a deleted topic, zero, unknown) and each partition's error code and
// fields. It is how the expected answers of internal/handlers' topic-id tables
// were taken from Kafka 4.4.
//
// Both brokers must be set up as for sharecompare (interop/README.md): SASL PLAIN,
// an ACL authorizer, a super user admin and a plain user alice.
//
//	go run ./interop/cmd/topicidcompare -kafka 127.0.0.1:9192 -strata 127.0.0.1:9292
//
// The exit status is 1 when any case differs.
package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/interop/cmd/internal/sidebyside"
)

func main() {
	prefix := fmt.Sprintf("tid%06d-", rand.IntN(1e6))
	sidebyside.Main("topicidcompare", 3*time.Minute, func(ctx context.Context, addr string) ([]sidebyside.Result, error) {
		r := &run{prefix: prefix, ids: map[[16]byte]string{{}: "zero"}}
		return r.all(ctx, addr)
	})
}

// unknownID names no topic on either broker.
var unknownID = [16]byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}

type run struct {
	prefix string
	// older and olderAlice: Produce 12, OffsetCommit/OffsetFetch 9, TxnOffsetCommit 5
	admin, alice, older, olderAlice *kgo.Client
	ids                             map[[16]byte]string
	idA, idB, idD                   [16]byte
	outs                            []sidebyside.Result
	pid                             int64
	epoch                           int16
}

func (r *run) add(name, out string) { r.outs = append(r.outs, sidebyside.Result{Name: name, Out: out}) }

func (r *run) all(ctx context.Context, addr string) ([]sidebyside.Result, error) {
	login := func(user string, opts ...kgo.Opt) (*kgo.Client, error) {
		return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RetryTimeout(5 * time.Second),
			kgo.SASL(plain.Auth{User: user, Pass: user + "-secret"}.AsMechanism())}, opts...)...)
	}
	var err error
	if r.admin, err = login("admin"); err != nil {
		return nil, err
	}
	defer r.admin.Close()
	if r.alice, err = login("alice"); err != nil {
		return nil, err
	}
	defer r.alice.Close()
	older := kversion.Stable()
	older.SetMaxKeyVersion(0, 12)
	older.SetMaxKeyVersion(8, 9)
	older.SetMaxKeyVersion(9, 9)
	older.SetMaxKeyVersion(28, 5)
	if r.older, err = login("admin", kgo.MaxVersions(older)); err != nil {
		return nil, err
	}
	defer r.older.Close()
	if r.olderAlice, err = login("alice", kgo.MaxVersions(older)); err != nil {
		return nil, err
	}
	defer r.olderAlice.Close()
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	r.produceCases(ctx)
	r.offsetCommitCases(ctx)
	r.offsetFetchCases(ctx)
	if err := r.txnCases(ctx); err != nil {
		return nil, err
	}
	return r.outs, nil
}

func (r *run) setup(ctx context.Context) error {
	adm := kadm.NewClient(r.admin)
	p := r.prefix
	for _, t := range []struct {
		suffix string
		n      int32
	}{{"a", 2}, {"b", 1}, {"d", 1}} {
		if _, err := adm.CreateTopic(ctx, t.n, 1, nil, p+t.suffix); err != nil {
			return err
		}
	}
	acls := kadm.NewACLs().Allow("User:alice").Topics(p+"a").Groups(p+"g").TransactionalIDs(p+"tx").
		Operations(kadm.OpRead, kadm.OpWrite, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	if _, err := adm.CreateACLs(ctx, acls); err != nil {
		return fmt.Errorf("ACLs: %w", err)
	}
	if err := until(ctx, "topics with leaders", func() error {
		md, err := adm.Metadata(ctx, p+"a", p+"b", p+"d")
		if err != nil {
			return err
		}
		for _, t := range md.Topics {
			if t.Err != nil {
				return t.Err
			}
			for _, pt := range t.Partitions {
				if pt.Leader < 0 {
					return errors.New("no leader")
				}
			}
		}
		r.idA, r.idB, r.idD = md.Topics[p+"a"].ID, md.Topics[p+"b"].ID, md.Topics[p+"d"].ID
		return nil
	}); err != nil {
		return err
	}
	r.ids[r.idA], r.ids[r.idB], r.ids[r.idD], r.ids[unknownID] = "a", "b", "d", "unknown"
	// Committed offsets of group g for a-0, b-0 and d-0 (by name, v9), then d deleted.
	if err := until(ctx, "a commit of group g", func() error {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = p+"g", -1
		for _, c := range []struct {
			topic string
			off   int64
		}{{"a", 5}, {"b", 7}, {"d", 9}} {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = p + c.topic
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Offset = c.off
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, r.older)
		if err != nil {
			return err
		}
		for _, t := range resp.Topics {
			for _, pt := range t.Partitions {
				if err := kerr.ErrorForCode(pt.ErrorCode); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if _, err := adm.DeleteTopics(ctx, p+"d"); err != nil {
		return err
	}
	return until(ctx, "d deleted and alice's ACLs", func() error {
		md, err := adm.Metadata(ctx, p+"d")
		if err != nil {
			return err
		}
		if md.Topics[p+"d"].Err == nil {
			return errors.New("d still listed")
		}
		amd, err := kadm.NewClient(r.alice).Metadata(ctx, p+"a")
		if err != nil {
			return err
		}
		return amd.Topics[p+"a"].Err
	})
}

// until retries f for 30 s.
func until(ctx context.Context, what string, f func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// part is one partition of a request: its topic (a, b, d, zero, unknown) and index.
type part struct {
	topic string
	index int32
}

func parts(spec string) []part {
	var ps []part
	for _, f := range strings.Fields(spec) {
		var p part
		name, idx, _ := strings.Cut(f, "/")
		p.topic = name
		fmt.Sscan(idx, &p.index)
		ps = append(ps, p)
	}
	return ps
}

func (r *run) id(topic string) [16]byte {
	for id, name := range r.ids {
		if name == topic {
			return id
		}
	}
	panic("no topic " + topic)
}

func (r *run) label(id [16]byte) string {
	if l, ok := r.ids[id]; ok {
		return l
	}
	return "other"
}

// grouped returns the topics of ps in order of first appearance with their
// partitions; a topic named twice in a row is one entry, "+" starts a new one.
func grouped(ps []part) [][]part {
	var out [][]part
	for _, p := range ps {
		if p.topic == "+" {
			out = append(out, nil)
			continue
		}
		if n := len(out); n > 0 && (len(out[n-1]) == 0 || out[n-1][0].topic == p.topic) {
			out[n-1] = append(out[n-1], p)
			continue
		}
		out = append(out, []part{p})
	}
	return out
}

// topic renders one answered topic: its id's label, its name when the
// version carries one, and its partitions.
func (r *run) topic(id [16]byte, name string, partitions []string) string {
	s := r.label(id)
	if name != "" {
		s += "(name " + strings.TrimPrefix(name, r.prefix) + ")"
	}
	return s + " [" + strings.Join(partitions, " ") + "]"
}

// render is an answer's topics (T, of them the id, name and partitions P),
// each with its partitions (part: the index and the fields shown), both in
// order: Kafka answers them in a hash map's order, which a client does not
// depend on.
func render[T, P any](r *run, topics []T, of func(*T) ([16]byte, string, []P), part func(*P) (int32, string)) string {
	var out []string
	for i := range topics {
		id, name, ps := of(&topics[i])
		shown := make(map[int32]string, len(ps))
		for j := range ps {
			index, fields := part(&ps[j])
			shown[index] = fmt.Sprintf("%d:%s", index, fields)
		}
		var strs []string
		for _, index := range slices.Sorted(maps.Keys(shown)) {
			strs = append(strs, shown[index])
		}
		out = append(out, r.topic(id, name, strs))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

func code(c int16) string {
	if c == 0 {
		return "ok"
	}
	if e, ok := kerr.ErrorForCode(c).(*kerr.Error); ok {
		return e.Message
	}
	return fmt.Sprint(c)
}

func str(s *string) string {
	if s == nil {
		return "null"
	}
	return fmt.Sprintf("%q", *s)
}

// broker returns the one broker of cl's cluster, so that requests go to it
// as they are (no sharding, no retries).
func broker(ctx context.Context, cl *kgo.Client) *kgo.Broker {
	if bs := cl.DiscoveredBrokers(); len(bs) > 0 {
		return bs[0]
	}
	kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	return cl.DiscoveredBrokers()[0]
}

func (r *run) produce(ctx context.Context, name string, cl *kgo.Client, spec string) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	for _, g := range grouped(parts(spec)) {
		rt := kmsg.NewProduceRequestTopic()
		if g[0].topic != "+" {
			rt.TopicID = r.id(g[0].topic)
			rt.Topic = r.prefix + g[0].topic // v12 and below
		}
		for _, p := range g {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition = p.index
			rp.Records, _ = batch.Build(batch.BuildOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, FirstTimestamp: 1}, []batch.Record{{Value: []byte("v")}})
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	kr, err := broker(ctx, cl).Request(ctx, req)
	if err != nil {
		r.add(name, "error: "+err.Error())
		return
	}
	resp := kr.(*kmsg.ProduceResponse)
	topics := render(r, resp.Topics, func(t *kmsg.ProduceResponseTopic) ([16]byte, string, []kmsg.ProduceResponseTopicPartition) {
		return t.TopicID, t.Topic, t.Partitions
	}, func(p *kmsg.ProduceResponseTopicPartition) (int32, string) {
		return p.Partition, fmt.Sprintf("%s,base%d,lat%d,lso%d,rec%d,msg=%v,leader%d/%d", code(p.ErrorCode), p.BaseOffset,
			p.LogAppendTime, p.LogStartOffset, len(p.ErrorRecords), p.ErrorMessage != nil, p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch)
	})
	r.add(name, fmt.Sprintf("v%d %s endpoints%d", resp.Version, topics, len(resp.Brokers)))
}

func (r *run) produceCases(ctx context.Context) {
	r.produce(ctx, "produce: a by id", r.admin, "a/0 a/1")
	r.produce(ctx, "produce: unknown id", r.admin, "unknown/0")
	r.produce(ctx, "produce: zero id", r.admin, "zero/0")
	r.produce(ctx, "produce: deleted topic's id", r.admin, "d/0")
	r.produce(ctx, "produce: unknown partition", r.admin, "a/7")
	r.produce(ctx, "produce: mixed", r.admin, "b/0 unknown/0 unknown/1 a/1 a/9 zero/0")
	r.produce(ctx, "produce: a twice", r.admin, "a/0 + a/1")
	r.produce(ctx, "produce: alice, b denied", r.alice, "b/0 a/0")
	r.produce(ctx, "produce: alice, unknown id", r.alice, "unknown/0 d/0")
	r.produce(ctx, "produce v12: by name", r.older, "a/0 b/0")
	r.produce(ctx, "produce v12: a twice", r.older, "a/0 + a/1")
}

func (r *run) offsetCommit(ctx context.Context, name string, cl *kgo.Client, group, spec string) {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = r.prefix+group, -1
	for _, g := range grouped(parts(spec)) {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.TopicID, rt.Topic = r.id(g[0].topic), r.prefix+g[0].topic
		for _, p := range g {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p.index, 3
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	kr, err := broker(ctx, cl).Request(ctx, req)
	if err != nil {
		r.add(name, "error: "+err.Error())
		return
	}
	resp := kr.(*kmsg.OffsetCommitResponse)
	r.add(name, fmt.Sprintf("v%d %s", resp.Version, render(r, resp.Topics,
		func(t *kmsg.OffsetCommitResponseTopic) ([16]byte, string, []kmsg.OffsetCommitResponseTopicPartition) {
			return t.TopicID, t.Topic, t.Partitions
		}, func(p *kmsg.OffsetCommitResponseTopicPartition) (int32, string) {
			return p.Partition, code(p.ErrorCode)
		})))
}

func (r *run) offsetCommitCases(ctx context.Context) {
	r.offsetCommit(ctx, "commit: a by id", r.admin, "g", "a/0 a/1")
	r.offsetCommit(ctx, "commit: unknown id", r.admin, "g", "unknown/0")
	r.offsetCommit(ctx, "commit: zero id", r.admin, "g", "zero/0")
	r.offsetCommit(ctx, "commit: deleted topic's id", r.admin, "g", "d/0")
	r.offsetCommit(ctx, "commit: unknown partition", r.admin, "g", "a/7")
	r.offsetCommit(ctx, "commit: mixed", r.admin, "g", "b/0 unknown/0 a/1 a/9 zero/0 d/0")
	r.offsetCommit(ctx, "commit: a twice", r.admin, "g", "a/0 + a/1")
	r.offsetCommit(ctx, "commit: alice, b denied", r.alice, "g", "b/0 a/1")
	r.offsetCommit(ctx, "commit: alice, unknown id", r.alice, "g", "unknown/0 a/0")
	r.offsetCommit(ctx, "commit: alice, group denied", r.alice, "g2", "a/0 unknown/0")
	r.offsetCommit(ctx, "commit: only unknown ids, new group", r.admin, "g3", "unknown/0 zero/0")
}

// fetchGroup is one group of an OffsetFetch: its name and topics (nil: all).
type fetchGroup struct {
	group string
	spec  *string
}

func topicsOf(spec string) *string { return &spec }

func (r *run) offsetFetch(ctx context.Context, name string, cl *kgo.Client, groups ...fetchGroup) {
	req := kmsg.NewPtrOffsetFetchRequest()
	for _, fg := range groups {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = r.prefix + fg.group
		if fg.spec != nil {
			rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
			for _, g := range grouped(parts(*fg.spec)) {
				rt := kmsg.NewOffsetFetchRequestGroupTopic()
				rt.TopicID, rt.Topic = r.id(g[0].topic), r.prefix+g[0].topic
				for _, p := range g {
					rt.Partitions = append(rt.Partitions, p.index)
				}
				rg.Topics = append(rg.Topics, rt)
			}
		}
		req.Groups = append(req.Groups, rg)
	}
	kr, err := broker(ctx, cl).Request(ctx, req)
	if err != nil {
		r.add(name, "error: "+err.Error())
		return
	}
	resp := kr.(*kmsg.OffsetFetchResponse)
	var b strings.Builder
	fmt.Fprintf(&b, "v%d", resp.Version)
	for _, g := range resp.Groups {
		topics := render(r, g.Topics, func(t *kmsg.OffsetFetchResponseGroupTopic) ([16]byte, string, []kmsg.OffsetFetchResponseGroupTopicPartition) {
			return t.TopicID, t.Topic, t.Partitions
		}, func(p *kmsg.OffsetFetchResponseGroupTopicPartition) (int32, string) {
			return p.Partition, fmt.Sprintf("%s,off%d,epoch%d,meta%s", code(p.ErrorCode), p.Offset, p.LeaderEpoch, str(p.Metadata))
		})
		fmt.Fprintf(&b, " %s:%s {%s}", strings.TrimPrefix(g.Group, r.prefix), code(g.ErrorCode), topics)
	}
	r.add(name, b.String())
}

func (r *run) offsetFetchCases(ctx context.Context) {
	r.offsetFetch(ctx, "fetch: a by id", r.admin, fetchGroup{"g", topicsOf("a/0 a/1 a/9")})
	r.offsetFetch(ctx, "fetch: unknown id", r.admin, fetchGroup{"g", topicsOf("unknown/0")})
	r.offsetFetch(ctx, "fetch: zero id", r.admin, fetchGroup{"g", topicsOf("zero/0")})
	r.offsetFetch(ctx, "fetch: deleted topic's id", r.admin, fetchGroup{"g", topicsOf("d/0")})
	r.offsetFetch(ctx, "fetch: mixed", r.admin, fetchGroup{"g", topicsOf("b/0 unknown/0 a/1 zero/0 d/0")})
	r.offsetFetch(ctx, "fetch: every topic (d deleted)", r.admin, fetchGroup{"g", nil})
	r.offsetFetch(ctx, "fetch: two groups", r.admin, fetchGroup{"g", topicsOf("a/0")}, fetchGroup{"nog", topicsOf("a/0 unknown/0")})
	r.offsetFetch(ctx, "fetch: unknown group, every topic", r.admin, fetchGroup{"nog", nil})
	r.offsetFetch(ctx, "fetch: alice, b denied", r.alice, fetchGroup{"g", topicsOf("b/0 a/0 unknown/0")})
	r.offsetFetch(ctx, "fetch: alice, every topic", r.alice, fetchGroup{"g", nil})
	r.offsetFetch(ctx, "fetch v9: alice, b denied", r.olderAlice, fetchGroup{"g", topicsOf("b/0 a/0")})
	r.offsetFetch(ctx, "fetch: alice, group denied", r.alice, fetchGroup{"g2", topicsOf("a/0 unknown/0")}, fetchGroup{"g", topicsOf("a/0")})
}

func (r *run) txnOffsetCommit(ctx context.Context, name string, cl *kgo.Client, txnID, group string, gen int32, member, spec string) {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group = r.prefix+txnID, r.prefix+group
	req.ProducerID, req.ProducerEpoch = r.pid, r.epoch
	req.Generation, req.MemberID = gen, member
	for _, g := range grouped(parts(spec)) {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.TopicID, rt.Topic = r.id(g[0].topic), r.prefix+g[0].topic
		for _, p := range g {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p.index, 4
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	kr, err := broker(ctx, cl).Request(ctx, req)
	if err != nil {
		r.add(name, "error: "+err.Error())
		return
	}
	resp := kr.(*kmsg.TxnOffsetCommitResponse)
	r.add(name, fmt.Sprintf("v%d %s", resp.Version, render(r, resp.Topics,
		func(t *kmsg.TxnOffsetCommitResponseTopic) ([16]byte, string, []kmsg.TxnOffsetCommitResponseTopicPartition) {
			return t.TopicID, t.Topic, t.Partitions
		}, func(p *kmsg.TxnOffsetCommitResponseTopicPartition) (int32, string) {
			return p.Partition, code(p.ErrorCode)
		})))
}

func (r *run) txnCases(ctx context.Context) error {
	if err := until(ctx, "InitProducerId", func() error {
		req := kmsg.NewPtrInitProducerIDRequest()
		id := r.prefix + "tx"
		req.TransactionalID, req.TransactionTimeoutMillis = &id, 60000
		resp, err := req.RequestWith(ctx, r.admin)
		if err != nil {
			return err
		}
		r.pid, r.epoch = resp.ProducerID, resp.ProducerEpoch
		return kerr.ErrorForCode(resp.ErrorCode)
	}); err != nil {
		return err
	}
	// A KIP-848 member of group cg, at epoch 1 or more.
	memberID := fmt.Sprintf("%s-member", r.prefix)
	var memberEpoch int32
	if err := until(ctx, "a consumer group member", func() error {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = r.prefix+"cg", memberID, 0, 30000
		req.SubscribedTopicNames = []string{r.prefix + "a"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		resp, err := req.RequestWith(ctx, r.admin)
		if err != nil {
			return err
		}
		memberEpoch = resp.MemberEpoch
		return kerr.ErrorForCode(resp.ErrorCode)
	}); err != nil {
		return err
	}
	r.txnOffsetCommit(ctx, "txn commit: a by id", r.admin, "tx", "g", -1, "", "a/0 a/1")
	r.txnOffsetCommit(ctx, "txn commit: unknown id", r.admin, "tx", "g", -1, "", "unknown/0")
	r.txnOffsetCommit(ctx, "txn commit: zero id", r.admin, "tx", "g", -1, "", "zero/0")
	r.txnOffsetCommit(ctx, "txn commit: deleted topic's id", r.admin, "tx", "g", -1, "", "d/0")
	r.txnOffsetCommit(ctx, "txn commit: unknown partition", r.admin, "tx", "g", -1, "", "a/7")
	r.txnOffsetCommit(ctx, "txn commit: mixed", r.admin, "tx", "g", -1, "", "b/0 unknown/0 a/1 a/9 zero/0 d/0")
	r.txnOffsetCommit(ctx, "txn commit: a twice", r.admin, "tx", "g", -1, "", "a/0 + a/1")
	r.txnOffsetCommit(ctx, "txn commit: alice, b denied", r.alice, "tx", "g", -1, "", "b/0 a/1 unknown/0")
	r.txnOffsetCommit(ctx, "txn commit: alice, group denied", r.alice, "tx", "g2", -1, "", "a/0 unknown/0")
	r.txnOffsetCommit(ctx, "txn commit: alice, transactional id denied", r.alice, "tx2", "g", -1, "", "a/0 unknown/0")
	for _, c := range []struct {
		cl   *kgo.Client
		name string
	}{{r.admin, "v6"}, {r.older, "v5"}} {
		r.txnOffsetCommit(ctx, "txn commit "+c.name+": unknown group with a generation", c.cl, "tx", "nog", 3, "m", "a/0")
		r.txnOffsetCommit(ctx, "txn commit "+c.name+": empty group, unknown member", c.cl, "tx", "g", 3, "m", "a/0")
		r.txnOffsetCommit(ctx, "txn commit "+c.name+": consumer member, newer epoch", c.cl, "tx", "cg", memberEpoch+1, memberID, "a/0")
		r.txnOffsetCommit(ctx, "txn commit "+c.name+": consumer member, its epoch", c.cl, "tx", "cg", memberEpoch, memberID, "a/0")
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = r.prefix+"tx", r.pid, r.epoch, false
	resp, err := end.RequestWith(ctx, r.admin)
	if err != nil {
		return err
	}
	r.add("end the transaction", code(resp.ErrorCode))
	leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	leave.Group, leave.MemberID, leave.MemberEpoch = r.prefix+"cg", memberID, -1
	leave.RequestWith(ctx, r.admin)
	return nil
}
