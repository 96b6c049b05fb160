package metadata

import (
	"errors"
	"reflect"
	"testing"
)

// TestDelegationTokens: tokens are created, replaced by a renewal, kept in
// snapshots and removed; records that would corrupt the set are refused.
func TestDelegationTokens(t *testing.T) {
	tok := DelegationToken{ID: "t1", Owner: "User:alice", Requester: "User:admin", Renewers: []string{"User:bob"},
		IssueTimestamp: 1000, ExpiryTimestamp: 2000, MaxTimestamp: 5000}
	img, err := Apply(NewImage(), &DelegationTokenRecord{DelegationToken: tok})
	if err != nil {
		t.Fatal(err)
	}
	renewed := tok
	renewed.ExpiryTimestamp = 4000
	if img, err = Apply(img, &DelegationTokenRecord{DelegationToken: renewed}); err != nil {
		t.Fatal(err)
	}
	got, ok := img.DelegationToken("t1")
	if !ok || !reflect.DeepEqual(*got, renewed) {
		t.Fatalf("token after renewal = %+v, %v; want %+v", got, ok, renewed)
	}
	if !got.OwnerOrRenewer("User:bob") || got.OwnerOrRenewer("User:eve") || got.Expired(4000) || !got.Expired(4001) {
		t.Errorf("OwnerOrRenewer or Expired wrong for %+v", got)
	}
	snap, err := DecodeSnapshot(EncodeSnapshot(img))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(snap.DelegationTokens(), img.DelegationTokens()) {
		t.Errorf("snapshot tokens = %+v, want %+v", snap.DelegationTokens(), img.DelegationTokens())
	}

	for name, rec := range map[string]Record{
		"no id":              &DelegationTokenRecord{DelegationToken: DelegationToken{Owner: "User:a", Requester: "User:a"}},
		"owner no principal": &DelegationTokenRecord{DelegationToken: DelegationToken{ID: "x", Owner: "alice", Requester: "User:a"}},
		"expiry past max":    &DelegationTokenRecord{DelegationToken: DelegationToken{ID: "x", Owner: "User:a", Requester: "User:a", ExpiryTimestamp: 2, MaxTimestamp: 1}},
		"owner changes":      &DelegationTokenRecord{DelegationToken: DelegationToken{ID: "t1", Owner: "User:eve", Requester: "User:admin", IssueTimestamp: 1000, ExpiryTimestamp: 2000, MaxTimestamp: 5000}},
		"remove unknown":     &RemoveDelegationTokenRecord{ID: "nope"},
	} {
		if _, err := Apply(img, rec); !errors.Is(err, ErrInvalidRequest) && !errors.Is(err, ErrResourceNotFound) {
			t.Errorf("%s: Apply error = %v, want a refusal", name, err)
		}
	}

	if img, err = Apply(img, &RemoveDelegationTokenRecord{ID: "t1"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := img.DelegationToken("t1"); ok || len(img.DelegationTokens()) != 0 {
		t.Errorf("token still there after removal")
	}
}
