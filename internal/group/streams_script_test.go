package group

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// KIP-1071 script commands (see TestScripts):
//
//	sthb NAME group= member= epoch= [topo=wordcount|copart|fixed] [tepoch=N]
//	     [rebalance=DUR] [process=] [endpoint=host:port] [tasks=0/0+1,1/2] [v=1]
//	     [shutdown] [instance=] [eepoch=N] [offsets=0/0@100+1@-2] [ends=0/0@150]
//	     [tags=zone:a+host:h1]
//	     (tasks=- sends empty task lists; no tasks sends null; offsets and
//	     ends are task offset sums, task@sum)
//	stdescribe NAME groups=g1,g2
//
// The named topologies, of an application "app" reading topic "in":
//
//	wordcount: subtopology 0 reads in and writes app-rep; subtopology 1 reads
//	           app-rep (a repartition topic) into a store logged to app-chg
//	copart:    subtopology 0 joins a and b (co-partitioned)
//	fixed:     wordcount with app-rep fixed at 2 partitions
func (h *harness) streamsRequestFunc(verb string, a args) (func(*Coordinator) func() []string, bool) {
	ctx := WithClient(context.Background(), Client{ID: a.str("client", "client"), Host: a.str("host", "/127.0.0.1")})
	switch verb {
	case "sthb":
		req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
		req.Version = int16(a.int("v", 1))
		req.Group = a.str("group", "")
		req.MemberID = a.str("member", "")
		req.MemberEpoch = int32(a.int("epoch", 0))
		req.InstanceID = a.optional("instance")
		req.EndpointInformationEpoch = int32(a.int("eepoch", 0))
		req.RebalanceTimeoutMillis = -1
		if d, ok := a["rebalance"]; ok {
			req.RebalanceTimeoutMillis = int32(mustDur(d).Milliseconds())
		}
		if t, ok := a["topo"]; ok {
			req.Topology = scriptTopology(t, int32(a.int("tepoch", 0)))
		}
		req.ProcessID = a.optional("process")
		if e, ok := a["endpoint"]; ok {
			host, port, _ := strings.Cut(e, ":")
			ue := kmsg.NewStreamsGroupHeartbeatRequestUserEndpoint()
			ue.Host, ue.Port = host, uint16(mustInt(port))
			req.UserEndpoint = &ue
		}
		if t, ok := a["tasks"]; ok {
			req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = scriptTasks(t), []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
		}
		if o, ok := a["offsets"]; ok {
			req.TaskOffsets = scriptTaskOffsets(o)
		}
		if o, ok := a["ends"]; ok {
			req.TaskEndOffsets = scriptTaskOffsets(o)
		}
		if t, ok := a["tags"]; ok {
			req.ClientTags = []kmsg.StreamsGroupHeartbeatRequestClientTag{}
			for _, kv := range strings.Split(t, "+") {
				k, v, _ := strings.Cut(kv, ":")
				req.ClientTags = append(req.ClientTags, kmsg.StreamsGroupHeartbeatRequestClientTag{Key: k, Value: v})
			}
		}
		_, req.ShutdownApplication = a["shutdown"]
		return func(c *Coordinator) func() []string {
			resp, create := c.StreamsGroupHeartbeat(ctx, req)
			return func() []string { return h.fmtStreamsHeartbeat(resp, create) }
		}, true
	case "stdescribe":
		req := kmsg.NewPtrStreamsGroupDescribeRequest()
		req.Version = 1
		req.Groups = a.list("groups")
		return func(c *Coordinator) func() []string {
			resp := c.StreamsGroupDescribe(ctx, req)
			return func() []string { return h.fmtStreamsDescribe(resp) }
		}, true
	}
	return nil, false
}

func scriptTopology(name string, epoch int32) *kmsg.StreamsGroupHeartbeatRequestTopology {
	top := kmsg.NewStreamsGroupHeartbeatRequestTopology()
	top.Epoch = epoch
	sub := func(id string) kmsg.StreamsGroupHeartbeatRequestTopologySubtopology {
		s := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
		s.SubtopologyID = id
		return s
	}
	info := func(topic string, partitions int32) kmsg.TopicInfo {
		ti := kmsg.NewTopicInfo()
		ti.Topic, ti.NumPartitions = topic, partitions
		return ti
	}
	switch name {
	case "wordcount", "fixed":
		s0, s1 := sub("0"), sub("1")
		s0.SourceTopics, s0.RepartitionSinkTopics = []string{"in"}, []string{"app-rep"}
		rep := info("app-rep", 0)
		if name == "fixed" {
			rep.NumPartitions = 2
		}
		chg := info("app-chg", 0)
		chg.Configs = []kmsg.TopicInfoConfig{{Key: "cleanup.policy", Value: "compact"}}
		s1.RepartitionSourceTopics, s1.StateChangelogTopics = []kmsg.TopicInfo{rep}, []kmsg.TopicInfo{chg}
		cg := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopologyCopartitionGroup()
		cg.RepartitionSourceTopics = []int16{0}
		s1.CopartitionGroups = append(s1.CopartitionGroups, cg)
		top.Subtopologies = append(top.Subtopologies, s0, s1)
	case "copart":
		s0 := sub("0")
		s0.SourceTopics = []string{"a", "b"}
		cg := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopologyCopartitionGroup()
		cg.SourceTopics = []int16{0, 1}
		s0.CopartitionGroups = append(s0.CopartitionGroups, cg)
		top.Subtopologies = append(top.Subtopologies, s0)
	default:
		panic("unknown topology " + name)
	}
	return &top
}

// scriptTasks parses 0/0+1,1/2 ("-": none) into task ids.
func scriptTasks(s string) []kmsg.TaskIDs {
	out := []kmsg.TaskIDs{}
	if s == "-" {
		return out
	}
	for _, t := range strings.Split(s, ",") {
		sub, parts, _ := strings.Cut(t, "/")
		ti := kmsg.NewTaskIDs()
		ti.SubtopologyID = sub
		for _, p := range strings.Split(parts, "+") {
			ti.Partitions = append(ti.Partitions, int32(mustInt(p)))
		}
		out = append(out, ti)
	}
	return out
}

// scriptTaskOffsets parses 0/0@100+1@-2,1/0@5 ("-": none) into task offsets.
func scriptTaskOffsets(s string) []kmsg.TaskOffset {
	out := []kmsg.TaskOffset{}
	if s == "-" {
		return out
	}
	for _, t := range strings.Split(s, ",") {
		sub, parts, _ := strings.Cut(t, "/")
		for _, po := range strings.Split(parts, "+") {
			p, o, _ := strings.Cut(po, "@")
			to := kmsg.NewTaskOffset()
			to.SubtopologyID, to.Partition, to.Offset = sub, int32(mustInt(p)), mustInt(o)
			out = append(out, to)
		}
	}
	return out
}

// fmtTaskOffsets prints task offsets as 0/0@100+1@-2 ("-" for none).
func fmtTaskOffsets(ts []kmsg.TaskOffset) string {
	if len(ts) == 0 {
		return "-"
	}
	var out []string
	for i, t := range ts {
		x := fmt.Sprintf("%d@%d", t.Partition, t.Offset)
		if i == 0 || ts[i-1].SubtopologyID != t.SubtopologyID {
			out = append(out, t.SubtopologyID+"/"+x)
			continue
		}
		out[len(out)-1] += "+" + x
	}
	return strings.Join(out, ",")
}

// fmtTasks prints task ids as 0/0+1,1/2, "-" for none (fmtPartitions' format).
func (h *harness) fmtTasks(ts []kmsg.TaskIDs) string {
	as := make([]kmsg.AssignmentTopicPartition, len(ts))
	for i, t := range ts {
		as[i] = kmsg.AssignmentTopicPartition{Topic: t.SubtopologyID, Partitions: t.Partitions}
	}
	return h.fmtPartitions(as)
}

func (h *harness) fmtStreamsHeartbeat(resp *kmsg.StreamsGroupHeartbeatResponse, create []kmsg.CreateTopicsRequestTopic) []string {
	if resp.ErrorCode != 0 {
		return []string{errName(resp.ErrorCode) + " " + strconv.Quote(deref(resp.ErrorMessage))}
	}
	s := fmt.Sprintf("NONE member=%s epoch=%d interval=%v", resp.MemberID, resp.MemberEpoch,
		time.Duration(resp.HeartbeatIntervalMillis)*time.Millisecond)
	if resp.ActiveTasks != nil {
		s += " active=" + h.fmtTasks(resp.ActiveTasks)
		if len(resp.StandbyTasks) > 0 {
			s += " standby=" + h.fmtTasks(resp.StandbyTasks)
		}
		if len(resp.WarmupTasks) > 0 {
			s += " warmup=" + h.fmtTasks(resp.WarmupTasks)
		}
	}
	if resp.PartitionsByUserEndpoint != nil {
		var es []string
		for _, e := range resp.PartitionsByUserEndpoint {
			var ps []string
			for _, ap := range e.ActivePartitions {
				ps = append(ps, fmt.Sprintf("%s/%v", ap.Topic, ap.Partitions))
			}
			for _, sp := range e.StandbyPartitions {
				ps = append(ps, fmt.Sprintf("standby:%s/%v", sp.Topic, sp.Partitions))
			}
			es = append(es, fmt.Sprintf("%s:%d=%s", e.UserEndpoint.Host, e.UserEndpoint.Port, strings.Join(ps, ",")))
		}
		s += fmt.Sprintf(" endpoint-epoch=%d endpoints=[%s]", resp.EndpointInformationEpoch, strings.Join(es, " "))
	}
	out := []string{s}
	for _, st := range resp.Status {
		out = append(out, fmt.Sprintf("  status %d %q", st.StatusCode, st.StatusDetail))
	}
	for _, t := range create {
		var cfgs []string
		for _, c := range t.Configs {
			cfgs = append(cfgs, c.Name+"="+deref(c.Value))
		}
		out = append(out, fmt.Sprintf("  create %s partitions=%d rf=%d configs=%s", t.Topic, t.NumPartitions, t.ReplicationFactor, strings.Join(cfgs, ",")))
	}
	return out
}

func (h *harness) fmtStreamsDescribe(resp *kmsg.StreamsGroupDescribeResponse) []string {
	var out []string
	for _, g := range resp.Groups {
		if g.ErrorCode != 0 {
			out = append(out, fmt.Sprintf("%s %s %q", g.Group, errName(g.ErrorCode), deref(g.ErrorMessage)))
			continue
		}
		out = append(out, fmt.Sprintf("%s NONE state=%s epoch=%d assignment-epoch=%d assignor=%s",
			g.Group, g.State, g.Epoch, g.AssignmentEpoch, deref(g.AssignorName)))
		if g.Topology != nil {
			out = append(out, fmt.Sprintf("  topology epoch=%d", g.Topology.Epoch))
			for _, s := range g.Topology.Subtopologies {
				x := fmt.Sprintf("    %s sources=%s sinks=%s", s.SubtopologyID, strings.Join(s.SourceTopics, "+"), strings.Join(s.RepartitionSinkTopics, "+"))
				for _, ti := range s.RepartitionSourceTopics {
					x += fmt.Sprintf(" repartition=%s:%d", ti.Topic, ti.NumPartitions)
				}
				for _, ti := range s.StateChangelogTopics {
					x += fmt.Sprintf(" changelog=%s:%d", ti.Topic, ti.NumPartitions)
				}
				out = append(out, x)
			}
		}
		for _, m := range g.Members {
			x := "  " + m.MemberID
			if m.InstanceID != nil {
				x += " instance=" + *m.InstanceID
			}
			x += fmt.Sprintf(" epoch=%d process=%s client=%s topology-epoch=%d active=%s target=%s",
				m.MemberEpoch, m.ProcessID, m.ClientID, m.TopologyEpoch,
				h.fmtTasks(m.Assignment.ActiveTasks), h.fmtTasks(m.TargetAssignment.ActiveTasks))
			if len(m.Assignment.StandbyTasks)+len(m.TargetAssignment.StandbyTasks) > 0 {
				x += " standby=" + h.fmtTasks(m.Assignment.StandbyTasks) + " target-standby=" + h.fmtTasks(m.TargetAssignment.StandbyTasks)
			}
			if len(m.Assignment.WarmupTasks)+len(m.TargetAssignment.WarmupTasks) > 0 {
				x += " warmup=" + h.fmtTasks(m.Assignment.WarmupTasks) + " target-warmup=" + h.fmtTasks(m.TargetAssignment.WarmupTasks)
			}
			if len(m.TaskOffsets)+len(m.TaskEndOffsets) > 0 {
				x += " offsets=" + fmtTaskOffsets(m.TaskOffsets) + " ends=" + fmtTaskOffsets(m.TaskEndOffsets)
			}
			out = append(out, x)
		}
	}
	return out
}

// fmtStreamsRecord prints a streams group record of the log.
func (h *harness) fmtStreamsRecord(k decodedKey, value []byte) string {
	names := map[int16]string{
		typeStreamsMetadata: "streams-metadata", typeStreamsMember: "streams-member",
		typeStreamsTargetMetadata: "streams-target-metadata", typeStreamsTargetMember: "streams-target",
		typeStreamsCurrent: "streams-current", typeStreamsTopology: "streams-topology",
	}
	s := names[k.typ] + " " + k.group
	if k.member != "" {
		s += "/" + h.name(k.member)
	}
	if value == nil {
		return s + " tombstone"
	}
	tasks := func(ts []streamsTasks) string {
		var out []string
		for _, t := range ts {
			var ps []string
			for i, p := range t.partitions {
				x := strconv.Itoa(int(p))
				if t.epochs != nil {
					x += fmt.Sprintf("@%d", t.epochs[i])
				}
				ps = append(ps, x)
			}
			out = append(out, t.subtopology+"/"+strings.Join(ps, "+"))
		}
		if len(out) == 0 {
			return "-"
		}
		return strings.Join(out, ",")
	}
	var err error
	switch k.typ {
	case typeStreamsMetadata:
		var v streamsMetadataValue
		if v, err = decodeStreamsMetadata(value); err == nil {
			s += fmt.Sprintf(" epoch=%d validated-topology-epoch=%d", v.epoch, v.validatedTopologyEpoch)
		}
	case typeStreamsTopology:
		var top *kmsg.StreamsGroupHeartbeatRequestTopology
		if top, err = decodeStreamsTopology(value); err == nil {
			var subs []string
			for _, st := range top.Subtopologies {
				subs = append(subs, st.SubtopologyID)
			}
			s += fmt.Sprintf(" epoch=%d subtopologies=%s", top.Epoch, strings.Join(subs, ","))
		}
	case typeStreamsTargetMetadata:
		var v targetMetaValue
		if v, err = decodeTargetMeta(typeStreamsTargetMetadata, value); err == nil {
			s += fmt.Sprintf(" epoch=%d", v.epoch)
		}
	case typeStreamsMember:
		var v streamsMemberValue
		if v, err = decodeStreamsMember(value); err == nil {
			s += fmt.Sprintf(" process=%s client=%s topology-epoch=%d rebalance=%dms", v.processID, v.clientID, v.topologyEpoch, v.rebalanceTimeoutMs)
			if v.instanceID != nil {
				s += " instance=" + *v.instanceID
			}
			if v.endpoint != nil {
				s += fmt.Sprintf(" endpoint=%s:%d", v.endpoint.Host, v.endpoint.Port)
			}
		}
	case typeStreamsTargetMember:
		var v streamsTargetValue
		if v, err = decodeStreamsTarget(value); err == nil {
			s += " active=" + tasks(v.active) + " standby=" + tasks(v.standby)
		}
	case typeStreamsCurrent:
		var v streamsCurrentValue
		if v, err = decodeStreamsCurrent(value); err == nil {
			s += fmt.Sprintf(" epoch=%d prev=%d state=%d active=%s standby=%s revoking=%s",
				v.epoch, v.prevEpoch, v.state, tasks(v.active), tasks(v.standby), tasks(v.activeRevoking))
			if len(v.warmup) > 0 {
				s += " warmup=" + tasks(v.warmup)
			}
		}
	}
	if err != nil {
		return s + " bad value: " + err.Error()
	}
	return s
}
