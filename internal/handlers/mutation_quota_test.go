package handlers

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/quota"
)

// newMutationQuotaHandlers is newAdminHandlers with controller_mutation_rate=1
// on the default client id (a bucket of 11 partitions) and a stopped clock.
func newMutationQuotaHandlers(t *testing.T) *Handlers {
	t.Helper()
	now := time.Unix(1000, 0)
	h := newAdminHandlersWith(t, Config{Quotas: quota.New(func() time.Time { return now })})
	req := kmsg.NewPtrAlterClientQuotasRequest()
	e := kmsg.NewAlterClientQuotasRequestEntry()
	e.Entity = []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "client-id"}}
	e.Ops = []kmsg.AlterClientQuotasRequestEntryOp{{Key: "controller_mutation_rate", Value: 1}}
	req.Entries = append(req.Entries, e)
	if r := serve(t, h, req).(*kmsg.AlterClientQuotasResponse); r.Entries[0].ErrorCode != 0 {
		t.Fatalf("AlterClientQuotas: %v", kerr.ErrorForCode(r.Entries[0].ErrorCode))
	}
	return h
}

func createTopicsV7(t *testing.T, h *Handlers, topics map[string]int32, order ...string) []nameCode {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	req.TimeoutMillis = 10000
	for _, name := range order {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, topics[name], 1
		req.Topics = append(req.Topics, rt)
	}
	var got []nameCode
	for _, rt := range serve(t, h, req).(*kmsg.CreateTopicsResponse).Topics {
		got = append(got, nameCode{rt.Topic, rt.ErrorCode})
	}
	return got
}

// TestMutationQuotaSkipsTopicsRefusedFirst: Kafka's controller counts a
// topic's partitions against controller_mutation_rate only once the topic has
// passed its own checks (ReplicationControlManager: an existing topic, an
// unknown one, a partition count that does not grow are refused before
// applyPartitionChangeQuota, a name given twice before the controller), so such
// a topic neither spends the client's
// tokens nor gets THROTTLING_QUOTA_EXCEEDED in place of its own error. Strata
// used to count them, and to refuse them with the quota's error while the
// bucket was empty.
func TestMutationQuotaSkipsTopicsRefusedFirst(t *testing.T) {
	t.Run("not counted", func(t *testing.T) {
		h := newMutationQuotaHandlers(t)
		// t exists: only a's 11 partitions are spent, leaving the bucket at 0,
		// so b is still admitted.
		wantCodes(t, "CreateTopics", createTopicsV7(t, h, map[string]int32{"t": 11, "a": 11}, "t", "a"),
			"t", kerr.TopicAlreadyExists, "a", nil)
		wantCodes(t, "CreateTopics", createTopicsV7(t, h, map[string]int32{"b": 1}, "b"), "b", nil)
	})
	t.Run("a name twice", func(t *testing.T) {
		h := newMutationQuotaHandlers(t)
		// Both d entries are refused as a whole: only a's 11 partitions count.
		req := kmsg.NewPtrCreateTopicsRequest()
		req.SetVersion(7)
		req.TimeoutMillis = 10000
		for _, name := range []string{"d", "d", "a"} {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 11, 1
			req.Topics = append(req.Topics, rt)
		}
		var got []nameCode
		for _, rt := range serve(t, h, req).(*kmsg.CreateTopicsResponse).Topics {
			got = append(got, nameCode{rt.Topic, rt.ErrorCode})
		}
		wantCodes(t, "CreateTopics", got, "d", kerr.InvalidRequest, "d", kerr.InvalidRequest, "a", nil)
		wantCodes(t, "CreateTopics", createTopicsV7(t, h, map[string]int32{"b": 1}, "b"), "b", nil)
	})
	t.Run("their own errors while throttled", func(t *testing.T) {
		h := newMutationQuotaHandlers(t)
		wantCodes(t, "CreateTopics", createTopicsV7(t, h, map[string]int32{"big": 20}, "big"), "big", nil)
		// The bucket is at -9 now.
		wantCodes(t, "CreateTopics", createTopicsV7(t, h, map[string]int32{"t": 1, "new": 1}, "t", "new"),
			"t", kerr.TopicAlreadyExists, "new", kerr.ThrottlingQuotaExceeded)

		del := kmsg.NewPtrDeleteTopicsRequest()
		del.SetVersion(5)
		del.TimeoutMillis, del.TopicNames = 10000, []string{"nope", "t"}
		var got []nameCode
		for _, rt := range serve(t, h, del).(*kmsg.DeleteTopicsResponse).Topics {
			got = append(got, nameCode{nullable(rt.Topic), rt.ErrorCode})
		}
		wantCodes(t, "DeleteTopics", got, "nope", kerr.UnknownTopicOrPartition, "t", kerr.ThrottlingQuotaExceeded)

		cp := kmsg.NewPtrCreatePartitionsRequest()
		cp.SetVersion(3)
		cp.TimeoutMillis = 10000
		for _, tc := range []struct {
			topic string
			count int32
		}{{"nope", 3}, {"t", 2}, {"t_x", 2}} {
			ct := kmsg.NewCreatePartitionsRequestTopic()
			ct.Topic, ct.Count = tc.topic, tc.count
			cp.Topics = append(cp.Topics, ct)
		}
		got = nil
		for _, rt := range serve(t, h, cp).(*kmsg.CreatePartitionsResponse).Topics {
			got = append(got, nameCode{rt.Topic, rt.ErrorCode})
		}
		wantCodes(t, "CreatePartitions", got, "nope", kerr.UnknownTopicOrPartition, "t", kerr.InvalidPartitions,
			"t_x", kerr.ThrottlingQuotaExceeded)
	})
}
