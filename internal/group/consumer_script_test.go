package group

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// KIP-848 script commands (see TestScripts):
//
//	topics NAME set=t1:3,t2:1                 (creates, grows or, with :0, deletes topics)
//	cghb NAME group= member= epoch= [instance=] [rack=] [subscribe=t1+t2] [regex=]
//	     [assignor=] [owned=t1/0+1,t2/0] [rebalance=DUR] [v=1]
//	     (owned=- sends an empty list; no owned sends null)
//	cgdescribe NAME groups=g1,g2
//	sghb NAME group= member= epoch= [subscribe=t1+t2] [rack=]   (share groups)
//	sgdescribe NAME groups=g1,g2
//	commit ... as in script_test.go, with v=9 and gen= the member epoch

// fakeTopics is a TopicCatalog a script edits; a topic's id is derived from its name
// and how often it was created.
type fakeTopics struct {
	mu      sync.Mutex
	topics  map[string]topicMeta
	made    map[string]int
	version uint64 // moved by every set
	listed  int    // TopicNames calls
}

func newFakeTopics() *fakeTopics {
	return &fakeTopics{topics: make(map[string]topicMeta), made: make(map[string]int)}
}

func (f *fakeTopics) set(name string, partitions int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.version++
	if partitions <= 0 {
		delete(f.topics, name)
		return
	}
	tm, ok := f.topics[name]
	if !ok {
		f.made[name]++
		copy(tm.id[:], fmt.Sprintf("%s#%d", name, f.made[name]))
	}
	tm.partitions = partitions
	f.topics[name] = tm
}

func (f *fakeTopics) Topic(name string) ([16]byte, int32, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	tm, ok := f.topics[name]
	return tm.id, tm.partitions, ok
}

func (f *fakeTopics) TopicName(id [16]byte) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, tm := range f.topics {
		if tm.id == id {
			return name, true
		}
	}
	return "", false
}

// timesListed is how often TopicNames was called.
func (f *fakeTopics) timesListed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.listed
}

func (f *fakeTopics) TopicNamesVersion() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.version
}

func (f *fakeTopics) TopicNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listed++
	var out []string
	for name := range f.topics {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// consumerRequestFunc builds the KIP-848 commands' requests.
func (h *harness) consumerRequestFunc(verb string, a args) (func(*Coordinator) func() []string, bool) {
	ctx := WithClient(context.Background(), Client{ID: a.str("client", "client"), Host: a.str("host", "/127.0.0.1")})
	switch verb {
	case "topics":
		for _, s := range a.list("set") {
			name, n, _ := strings.Cut(s, ":")
			h.topics.set(name, int32(mustInt(n)))
		}
		return func(*Coordinator) func() []string { return func() []string { return nil } }, true
	case "cghb":
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = int16(a.int("v", 1))
		req.Group = a.str("group", "")
		req.MemberID = h.id(a.str("member", ""))
		req.MemberEpoch = int32(a.int("epoch", 0))
		req.InstanceID = a.optional("instance")
		req.RackID = a.optional("rack")
		req.RebalanceTimeoutMillis = -1
		if d, ok := a["rebalance"]; ok {
			req.RebalanceTimeoutMillis = int32(mustDur(d).Milliseconds())
		}
		if s, ok := a["subscribe"]; ok {
			req.SubscribedTopicNames = []string{}
			if s != "" {
				req.SubscribedTopicNames = strings.Split(s, "+")
			}
		}
		req.SubscribedTopicRegex = a.optional("regex")
		req.ServerAssignor = a.optional("assignor")
		if o, ok := a["owned"]; ok {
			req.Topics = h.ownedTopics(o)
		}
		return func(c *Coordinator) func() []string {
			resp := c.ConsumerGroupHeartbeat(ctx, req)
			return func() []string { return []string{h.fmtHeartbeat(resp)} }
		}, true
	case "sghb":
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.Version = 1
		req.GroupID = a.str("group", "")
		req.MemberID = a.str("member", "")
		req.MemberEpoch = int32(a.int("epoch", 0))
		req.RackID = a.optional("rack")
		if s, ok := a["subscribe"]; ok {
			req.SubscribedTopicNames = strings.Split(s, "+")
		}
		return func(c *Coordinator) func() []string {
			resp := c.ShareGroupHeartbeat(ctx, req)
			return func() []string { return []string{h.fmtShareHeartbeat(resp)} }
		}, true
	case "sgdescribe":
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.Version = 1
		req.GroupIDs = a.list("groups")
		return func(c *Coordinator) func() []string {
			resp := c.ShareGroupDescribe(ctx, req)
			return func() []string { return h.fmtShareDescribe(resp) }
		}, true
	case "cgdescribe":
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Version = 1
		req.Groups = a.list("groups")
		return func(c *Coordinator) func() []string {
			resp := c.ConsumerGroupDescribe(ctx, req)
			return func() []string { return h.fmtConsumerDescribe(resp) }
		}, true
	}
	return h.streamsRequestFunc(verb, a)
}

// ownedTopics parses owned=t1/0+1,t2/0 ("-": none) into the request's topics.
func (h *harness) ownedTopics(s string) []kmsg.ConsumerGroupHeartbeatRequestTopic {
	out := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if s == "-" {
		return out
	}
	for _, t := range strings.Split(s, ",") {
		name, parts, _ := strings.Cut(t, "/")
		rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		rt.TopicID, _, _ = h.topics.Topic(name)
		for _, p := range strings.Split(parts, "+") {
			rt.Partitions = append(rt.Partitions, int32(mustInt(p)))
		}
		out = append(out, rt)
	}
	return out
}

// fmtPartitions prints assignment topics as t1/0+1 t2/0, "-" for none.
func (h *harness) fmtPartitions(ts []kmsg.AssignmentTopicPartition) string {
	var parts []string
	for _, t := range ts {
		ps := make([]string, len(t.Partitions))
		for i, p := range t.Partitions {
			ps[i] = strconv.Itoa(int(p))
		}
		parts = append(parts, t.Topic+"/"+strings.Join(ps, "+"))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

func (h *harness) fmtHeartbeat(resp *kmsg.ConsumerGroupHeartbeatResponse) string {
	if resp.ErrorCode != 0 {
		return errName(resp.ErrorCode) + " " + strconv.Quote(deref(resp.ErrorMessage))
	}
	s := fmt.Sprintf("NONE member=%s epoch=%d interval=%v", h.name(deref(resp.MemberID)), resp.MemberEpoch,
		time.Duration(resp.HeartbeatIntervalMillis)*time.Millisecond)
	if resp.Assignment != nil {
		var ts []kmsg.AssignmentTopicPartition
		for _, t := range resp.Assignment.Topics {
			name, ok := h.topics.TopicName(t.TopicID)
			if !ok {
				name = fmt.Sprintf("%x", t.TopicID)
			}
			ts = append(ts, kmsg.AssignmentTopicPartition{Topic: name, Partitions: t.Partitions})
		}
		s += " assignment=" + h.fmtPartitions(ts)
	}
	return s
}

func (h *harness) fmtConsumerDescribe(resp *kmsg.ConsumerGroupDescribeResponse) []string {
	var out []string
	for _, g := range resp.Groups {
		if g.ErrorCode != 0 {
			out = append(out, fmt.Sprintf("%s %s %q", g.Group, errName(g.ErrorCode), deref(g.ErrorMessage)))
			continue
		}
		out = append(out, fmt.Sprintf("%s NONE state=%s epoch=%d assignment-epoch=%d assignor=%s",
			g.Group, g.State, g.Epoch, g.AssignmentEpoch, g.AssignorName))
		for _, m := range g.Members {
			x := "  " + h.name(m.MemberID)
			if m.InstanceID != nil {
				x += " instance=" + *m.InstanceID
			}
			if m.MemberType == classicMemberType {
				x += " classic"
			}
			x += fmt.Sprintf(" epoch=%d client=%s subscribed=%s", m.MemberEpoch, m.ClientID, strings.Join(m.SubscribedTopics, "+"))
			if m.SubscribedTopicRegex != nil {
				x += " regex=" + *m.SubscribedTopicRegex
			}
			x += " assigned=" + h.fmtPartitions(m.Assignment.TopicPartitions)
			x += " target=" + h.fmtPartitions(m.TargetAssignment.TopicPartitions)
			out = append(out, x)
		}
	}
	return out
}

func (h *harness) fmtShareHeartbeat(resp *kmsg.ShareGroupHeartbeatResponse) string {
	if resp.ErrorCode != 0 {
		return errName(resp.ErrorCode) + " " + strconv.Quote(deref(resp.ErrorMessage))
	}
	s := fmt.Sprintf("NONE member=%s epoch=%d interval=%v", deref(resp.MemberID), resp.MemberEpoch,
		time.Duration(resp.HeartbeatIntervalMillis)*time.Millisecond)
	if resp.Assignment != nil {
		var ts []kmsg.AssignmentTopicPartition
		for _, t := range resp.Assignment.TopicPartitions {
			name, _ := h.topics.TopicName(t.TopicID)
			ts = append(ts, kmsg.AssignmentTopicPartition{Topic: name, Partitions: t.Partitions})
		}
		s += " assignment=" + h.fmtPartitions(ts)
	}
	return s
}

func (h *harness) fmtShareDescribe(resp *kmsg.ShareGroupDescribeResponse) []string {
	var out []string
	for _, g := range resp.Groups {
		if g.ErrorCode != 0 {
			out = append(out, fmt.Sprintf("%s %s %q", g.GroupID, errName(g.ErrorCode), deref(g.ErrorMessage)))
			continue
		}
		out = append(out, fmt.Sprintf("%s NONE state=%s epoch=%d assignment-epoch=%d assignor=%s", g.GroupID, g.GroupState, g.GroupEpoch, g.AssignmentEpoch, g.Assignor))
		for _, m := range g.Members {
			var ts []kmsg.AssignmentTopicPartition
			for _, t := range m.Assignment.TopicPartitions {
				ts = append(ts, kmsg.AssignmentTopicPartition{Topic: t.Topic, Partitions: t.Partitions})
			}
			out = append(out, fmt.Sprintf("  %s epoch=%d client=%s subscribed=%s assigned=%s", m.MemberID, m.MemberEpoch, m.ClientID,
				strings.Join(m.SubscribedTopicNames, "+"), h.fmtPartitions(ts)))
		}
	}
	return out
}

// fmtConsumerRecord prints a consumer group record of the log.
func (h *harness) fmtConsumerRecord(k decodedKey, value []byte) string {
	names := map[int16]string{
		typeConsumerMetadata: "cg-metadata", typeConsumerMember: "cg-member",
		typeConsumerTargetMetadata: "cg-target-metadata", typeConsumerTargetMember: "cg-target",
		typeConsumerCurrent: "cg-current", typeConsumerRegex: "cg-regex",
	}
	s := names[k.typ] + " " + k.group
	if k.member != "" {
		s += "/" + h.name(k.member)
	}
	if value == nil {
		return s + " tombstone"
	}
	byID := func(id [16]byte, ps []int32) kmsg.AssignmentTopicPartition {
		name, _ := h.topics.TopicName(id)
		return kmsg.AssignmentTopicPartition{Topic: name, Partitions: ps}
	}
	var err error
	switch k.typ {
	case typeConsumerMetadata:
		var v consumerMetadataValue
		if v, err = decodeConsumerMetadata(value); err == nil {
			s += fmt.Sprintf(" epoch=%d", v.epoch)
		}
	case typeConsumerTargetMetadata:
		var v targetMetaValue
		if v, err = decodeTargetMeta(typeConsumerTargetMetadata, value); err == nil {
			s += fmt.Sprintf(" epoch=%d", v.epoch)
		}
	case typeConsumerMember:
		var v consumerMemberValue
		if v, err = decodeConsumerMember(value); err == nil {
			s += fmt.Sprintf(" client=%s subscribed=%s", v.clientID, strings.Join(v.topics, "+"))
			for name, p := range map[string]*string{"instance": v.instanceID, "regex": v.regex, "assignor": v.serverAssignor} {
				if p != nil {
					s += " " + name + "=" + *p
				}
			}
			if v.classic != nil {
				s += fmt.Sprintf(" classic(session=%dms protocols=%d)", v.classic.sessionTimeoutMs, len(v.classic.protocols))
			}
		}
	case typeConsumerRegex:
		var v consumerRegexValue
		if v, err = decodeConsumerRegex(value); err == nil {
			s += fmt.Sprintf(" topics=%s", strings.Join(v.topics, "+"))
		}
	case typeConsumerTargetMember:
		var v targetMemberValue
		if v, err = decodeTargetMember(typeConsumerTargetMember, value); err == nil {
			var ts []kmsg.AssignmentTopicPartition
			for _, t := range v.partitions {
				ts = append(ts, byID(t.TopicID, t.Partitions))
			}
			s += " assigned=" + h.fmtPartitions(ts)
		}
	case typeConsumerCurrent:
		var v consumerCurrentValue
		if v, err = decodeConsumerCurrent(value); err == nil {
			parts := func(eps []epochPartitions) string {
				var ts []kmsg.AssignmentTopicPartition
				for _, t := range eps {
					ts = append(ts, byID(t.topicID, t.partitions))
				}
				return h.fmtPartitions(ts)
			}
			s += fmt.Sprintf(" epoch=%d prev=%d state=%d assigned=%s revoking=%s", v.epoch, v.prevEpoch, v.state, parts(v.assigned), parts(v.revoking))
		}
	}
	if err != nil {
		return s + " bad value: " + err.Error()
	}
	return s
}

// fmtShareRecord prints a share group record of the log.
func (h *harness) fmtShareRecord(k decodedKey, value []byte) string {
	names := map[int16]string{
		typeShareMetadata: "share-metadata", typeShareMember: "share-member",
		typeShareTargetMetadata: "share-target-metadata", typeShareTargetMember: "share-target",
		typeShareCurrent: "share-current",
	}
	s := names[k.typ] + " " + k.group
	if k.member != "" {
		s += "/" + h.name(k.member)
	}
	if value == nil {
		return s + " tombstone"
	}
	parts := func(ts []kmsg.AssignmentTopicPartition) string {
		for i := range ts {
			ts[i].Topic, _ = h.topics.TopicName(ts[i].TopicID)
		}
		return h.fmtPartitions(ts)
	}
	var err error
	switch k.typ {
	case typeShareMetadata:
		var v shareMetadataValue
		if v, err = decodeShareMetadata(value); err == nil {
			s += fmt.Sprintf(" epoch=%d", v.epoch)
		}
	case typeShareTargetMetadata:
		var v targetMetaValue
		if v, err = decodeTargetMeta(typeShareTargetMetadata, value); err == nil {
			s += fmt.Sprintf(" epoch=%d", v.epoch)
		}
	case typeShareMember:
		var v shareMemberValue
		if v, err = decodeShareMember(value); err == nil {
			s += fmt.Sprintf(" client=%s subscribed=%s", v.clientID, strings.Join(v.topics, "+"))
			if v.rackID != nil {
				s += " rack=" + *v.rackID
			}
		}
	case typeShareTargetMember:
		var v targetMemberValue
		if v, err = decodeTargetMember(typeShareTargetMember, value); err == nil {
			s += " assigned=" + parts(v.partitions)
		}
	case typeShareCurrent:
		var v shareCurrentValue
		if v, err = decodeShareCurrent(value); err == nil {
			s += fmt.Sprintf(" epoch=%d prev=%d state=%d assigned=%s", v.epoch, v.prevEpoch, v.state, parts(v.partitions))
		}
	}
	if err != nil {
		return s + " bad value: " + err.Error()
	}
	return s
}
