package share

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// erringStore is memStore whose loads or saves fail with the error set.
type erringStore struct {
	memStore
	mu      sync.Mutex
	loadErr error
	saveErr error
}

func (s *erringStore) set(loadErr, saveErr error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loadErr, s.saveErr = loadErr, saveErr
}

func (s *erringStore) Load(ctx context.Context, k Key, leaderEpoch int32) (Snapshot, bool, error) {
	s.mu.Lock()
	err := s.loadErr
	s.mu.Unlock()
	if err != nil {
		return Snapshot{}, false, err
	}
	return s.memStore.Load(ctx, k, leaderEpoch)
}

func (s *erringStore) Save(ctx context.Context, k Key, snap Snapshot) error {
	s.mu.Lock()
	err := s.saveErr
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.memStore.Save(ctx, k, snap)
}

// TestPersisterErrorCodes: a failed read or write of the share-partition state
// answers the code Kafka 4.4's share-partition leader maps the persister's error
// to (SharePartition.fetchPersisterError): coordinator errors
// COORDINATOR_NOT_AVAILABLE, fenced epochs NOT_LEADER_OR_FOLLOWER,
// GROUP_ID_NOT_FOUND and UNKNOWN_TOPIC_OR_PARTITION as they are, anything else
// UNKNOWN_SERVER_ERROR. A failed initialization is the ShareFetch partition's
// error; a failed write after an acknowledgement the ShareAcknowledge
// partition's, and a failed write of an acquisition the ShareFetch partition's.
func TestPersisterErrorCodes(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("share: WriteShareGroupState: %w", err) }
	for _, tc := range []struct {
		err  error
		want int16
	}{
		{wrap(kerr.NotCoordinator), kerr.CoordinatorNotAvailable.Code},
		{wrap(kerr.CoordinatorNotAvailable), kerr.CoordinatorNotAvailable.Code},
		{wrap(kerr.CoordinatorLoadInProgress), kerr.CoordinatorNotAvailable.Code},
		{kerr.FencedLeaderEpoch, kerr.NotLeaderForPartition.Code},
		{kerr.FencedStateEpoch, kerr.NotLeaderForPartition.Code},
		{kerr.GroupIDNotFound, kerr.GroupIDNotFound.Code},
		{kerr.UnknownTopicOrPartition, kerr.UnknownTopicOrPartition.Code},
		{kerr.RequestTimedOut, kerr.UnknownServerError.Code},
		{kerr.InvalidRequest, kerr.UnknownServerError.Code},
		{context.DeadlineExceeded, kerr.UnknownServerError.Code},
		{errors.New("share coordinator unreachable"), kerr.UnknownServerError.Code},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			store := &erringStore{}
			m, _ := newGroupCommitManager(t, store, 2)

			store.set(tc.err, nil)
			if _, _, code := lateFetch(t, m.ShareFetch(context.Background(), openFetch("m1"))); code != tc.want {
				t.Errorf("failed initialization: ShareFetch partition code %d, want %d", code, tc.want)
			}

			store.set(nil, nil)
			off := fetchOne(t, m, "m2")
			store.set(nil, tc.err)
			if code := accept(m, "m2", off); code != tc.want {
				t.Errorf("failed write of an acknowledgement: ShareAcknowledge partition code %d, want %d", code, tc.want)
			}
			if _, _, code := lateFetch(t, m.ShareFetch(context.Background(), openFetch("m3"))); code != tc.want {
				t.Errorf("failed write of an acquisition: ShareFetch partition code %d, want %d", code, tc.want)
			}
		})
	}
}
