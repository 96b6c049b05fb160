package group

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestWriteFailureCodes: every group API answers a failed append to
// __consumer_offsets with the code Kafka 4.4's coordinator does
// (CoordinatorOperationExceptionHelper.handleOperationException, and
// GroupMetadataManager.appendGroupMetadataErrorToResponseError for the classic
// join and sync): unavailable replicas and timeouts COORDINATOR_NOT_AVAILABLE,
// a lost partition NOT_COORDINATOR, a too-large batch UNKNOWN_SERVER_ERROR.
func TestWriteFailureCodes(t *testing.T) {
	ctx := context.Background()
	failures := []struct {
		name string
		err  error
		want int16
	}{
		{"not enough replicas", errors.New("not enough in-sync replicas"), kerr.CoordinatorNotAvailable.Code},
		{"timeout", fmt.Errorf("waiting for the high-water mark: %w", context.DeadlineExceeded), kerr.CoordinatorNotAvailable.Code},
		{"not coordinator", fmt.Errorf("lost leadership: %w", ErrNotCoordinator), kerr.NotCoordinator.Code},
		{"too large", fmt.Errorf("batch: %w", ErrRecordTooLarge), kerr.UnknownServerError.Code},
	}
	// Each api prepares c with working appends, then makes fail the store's
	// error and returns the code of the request whose append fails.
	apis := []struct {
		name string
		run  func(t *testing.T, c *Coordinator, store *txnMemStore, fail error) int16
	}{
		{"OffsetCommit", func(t *testing.T, c *Coordinator, store *txnMemStore, fail error) int16 {
			store.setFail(fail)
			return simpleCommit(c, "g", 9, map[topicPartition]int64{{"t", 0}: 5}).Topics[0].Partitions[0].ErrorCode
		}},
		{"TxnOffsetCommit", func(t *testing.T, c *Coordinator, store *txnMemStore, fail error) int16 {
			store.setFail(fail)
			req := kmsg.NewPtrTxnOffsetCommitRequest()
			req.Version, req.Group, req.ProducerID = 3, "g", 7
			req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{
				{Partition: 0, Offset: 5, LeaderEpoch: -1},
			}}}
			return c.TxnOffsetCommit(ctx, req).Topics[0].Partitions[0].ErrorCode
		}},
		{"OffsetDelete", func(t *testing.T, c *Coordinator, store *txnMemStore, fail error) int16 {
			commitTo(t, c, "g")
			store.setFail(fail)
			req := kmsg.NewPtrOffsetDeleteRequest()
			req.Group = "g"
			req.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
			return c.OffsetDelete(ctx, req).ErrorCode
		}},
		{"DeleteGroups", func(t *testing.T, c *Coordinator, store *txnMemStore, fail error) int16 {
			commitTo(t, c, "g")
			store.setFail(fail)
			return c.DeleteGroups(ctx, &kmsg.DeleteGroupsRequest{Groups: []string{"g"}}).Groups[0].ErrorCode
		}},
		{"JoinGroup", func(t *testing.T, c *Coordinator, store *txnMemStore, fail error) int16 {
			// A static member's restart replaces its member id in a Stable
			// group: a write.
			member, gen := classicJoinLeader(t, c, "i1")
			if r := classicSync(c, member, gen, true); r.ErrorCode != 0 {
				t.Fatalf("sync: %v", kerr.ErrorForCode(r.ErrorCode))
			}
			store.setFail(fail)
			return c.JoinGroup(ctx, classicJoinRequest("", "i1")).ErrorCode
		}},
		{"SyncGroup", func(t *testing.T, c *Coordinator, store *txnMemStore, fail error) int16 {
			member, gen := classicJoinLeader(t, c, "")
			store.setFail(fail)
			return classicSync(c, member, gen, true).ErrorCode
		}},
		{"ConsumerGroupHeartbeat", func(t *testing.T, c *Coordinator, store *txnMemStore, fail error) int16 {
			store.setFail(fail)
			return firstConsumerHeartbeat(ctx, c)
		}},
		{"ShareGroupHeartbeat", func(t *testing.T, c *Coordinator, store *txnMemStore, fail error) int16 {
			store.setFail(fail)
			return firstShareHeartbeat(ctx, c)
		}},
		{"StreamsGroupHeartbeat", func(t *testing.T, c *Coordinator, store *txnMemStore, fail error) int16 {
			store.setFail(fail)
			return firstStreamsHeartbeat(ctx, c)
		}},
	}
	for _, api := range apis {
		for _, f := range failures {
			t.Run(api.name+"/"+f.name, func(t *testing.T) {
				store := newTxnMemStore()
				cfg := DefaultConfig()
				cfg.GroupInitialRebalanceDelay = 0
				c := New(cfg, store, nil)
				defer c.Close()
				if err := loadAll(ctx, c, store.memStore); err != nil {
					t.Fatal(err)
				}
				if got := api.run(t, c, store, f.err); got != f.want {
					t.Errorf("answered %v, want %v", kerr.ErrorForCode(got), kerr.ErrorForCode(f.want))
				}
			})
		}
	}
}

// classicJoinRequest is a JoinGroup v5 to classic group "g", static when
// instance is set.
func classicJoinRequest(member, instance string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 5
	req.Group, req.MemberID, req.ProtocolType = "g", member, "consumer"
	if instance != "" {
		req.InstanceID = &instance
	}
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 10000
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	return req
}

// classicJoinLeader joins the only member of classic group "g" and returns its
// id and generation, the group then in CompletingRebalance.
func classicJoinLeader(t *testing.T, c *Coordinator, instance string) (string, int32) {
	t.Helper()
	r := c.JoinGroup(context.Background(), classicJoinRequest("", instance))
	if r.ErrorCode == kerr.MemberIDRequired.Code {
		r = c.JoinGroup(context.Background(), classicJoinRequest(r.MemberID, instance))
	}
	if r.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	return r.MemberID, r.Generation
}

// classicSync sends the SyncGroup of member of group "g", with an assignment
// when leader.
func classicSync(c *Coordinator, member string, gen int32, leader bool) *kmsg.SyncGroupResponse {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 3
	req.Group, req.MemberID, req.Generation = "g", member, gen
	if leader {
		req.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: member, MemberAssignment: []byte("a")}}
	}
	return c.SyncGroup(context.Background(), req)
}
