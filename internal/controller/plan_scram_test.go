package controller

import (
	"errors"
	"testing"

	"github.com/strata-stream/strata/internal/metadata"
)

func TestPlanAlterScramCredentials(t *testing.T) {
	salted := []byte("0123456789abcdef0123456789abcdef")
	up := func(user string, m metadata.ScramMechanism, iter int32) ScramUpsertion {
		return ScramUpsertion{User: user, Mechanism: m, Iterations: iter, Salt: []byte("salt"), SaltedPassword: salted}
	}
	recs, results := PlanAlterScramCredentials(metadata.NewImage(), nil, []ScramUpsertion{
		up("alice", metadata.ScramSHA256, 4096),
		up("bob", metadata.ScramSHA256, 4096),
	})
	if len(recs) != 2 || len(results) != 2 || results[0].Err != nil || results[1].Err != nil {
		t.Fatalf("recs %d results %+v", len(recs), results)
	}
	img, err := metadata.ApplyAll(metadata.NewImage(), recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		dels []ScramDeletion
		ups  []ScramUpsertion
		want map[string]error // by user; nil entries succeed
		recs int
	}{
		{name: "delete one", dels: []ScramDeletion{{"alice", metadata.ScramSHA256}}, want: map[string]error{"alice": nil}, recs: 1},
		{name: "delete missing", dels: []ScramDeletion{{"carol", metadata.ScramSHA256}}, want: map[string]error{"carol": metadata.ErrResourceNotFound}},
		// The cases below up to "unknown mechanism first" were sent to a Kafka 4.4
		// node (KRaft, StandardAuthorizer) and to Strata side by side in session 9;
		// the codes are Kafka's answers: a user named twice in one request is
		// DUPLICATE_RESOURCE unless its first change already failed, whatever
		// the mechanisms.
		{name: "two mechanisms", ups: []ScramUpsertion{up("carol", metadata.ScramSHA256, 4096), up("carol", metadata.ScramSHA512, 4096)},
			want: map[string]error{"carol": ErrDuplicateResource}},
		{name: "same mechanism twice", ups: []ScramUpsertion{up("carol", metadata.ScramSHA256, 4096), up("carol", metadata.ScramSHA256, 4096)},
			want: map[string]error{"carol": ErrDuplicateResource}},
		{name: "three times", ups: []ScramUpsertion{up("carol", metadata.ScramSHA256, 4096), up("carol", metadata.ScramSHA512, 4096), up("carol", metadata.ScramSHA256, 4096)},
			want: map[string]error{"carol": ErrDuplicateResource}},
		{name: "delete and upsert", dels: []ScramDeletion{{"alice", metadata.ScramSHA256}}, ups: []ScramUpsertion{up("alice", metadata.ScramSHA256, 4096)},
			want: map[string]error{"alice": ErrDuplicateResource}},
		{name: "delete twice", dels: []ScramDeletion{{"alice", metadata.ScramSHA256}, {"alice", metadata.ScramSHA256}},
			want: map[string]error{"alice": ErrDuplicateResource}},
		{name: "missing deletion then upsert", dels: []ScramDeletion{{"carol", metadata.ScramSHA256}}, ups: []ScramUpsertion{up("carol", metadata.ScramSHA512, 4096)},
			want: map[string]error{"carol": metadata.ErrResourceNotFound}},
		{name: "bad then good", ups: []ScramUpsertion{up("carol", metadata.ScramSHA256, 10), up("carol", metadata.ScramSHA512, 4096)},
			want: map[string]error{"carol": ErrUnacceptableCredential}},
		{name: "good then bad", ups: []ScramUpsertion{up("carol", metadata.ScramSHA256, 4096), up("carol", metadata.ScramSHA512, 10)},
			want: map[string]error{"carol": ErrDuplicateResource}},
		{name: "empty user twice", ups: []ScramUpsertion{up("", metadata.ScramSHA256, 4096), up("", metadata.ScramSHA512, 4096)},
			want: map[string]error{"": ErrUnacceptableCredential}},
		{name: "unknown mechanism first", ups: []ScramUpsertion{up("carol", 9, 4096), up("carol", metadata.ScramSHA256, 4096)},
			want: map[string]error{"carol": metadata.ErrUnsupportedSaslMechanism}},
		{name: "two users", ups: []ScramUpsertion{up("carol", metadata.ScramSHA256, 4096), up("dave", metadata.ScramSHA512, 4096)},
			want: map[string]error{"carol": nil, "dave": nil}, recs: 2},
		{name: "a duplicate fails only its user", dels: []ScramDeletion{{"alice", metadata.ScramSHA256}},
			ups:  []ScramUpsertion{up("alice", metadata.ScramSHA512, 4096), up("bob", metadata.ScramSHA512, 4096)},
			want: map[string]error{"alice": ErrDuplicateResource, "bob": nil}, recs: 1},
		{name: "iterations", ups: []ScramUpsertion{up("dave", metadata.ScramSHA256, 10)}, want: map[string]error{"dave": ErrUnacceptableCredential}},
		{name: "mechanism", ups: []ScramUpsertion{up("dave", 7, 4096)}, want: map[string]error{"dave": metadata.ErrUnsupportedSaslMechanism}},
		{name: "empty user", ups: []ScramUpsertion{up("", metadata.ScramSHA256, 4096)}, want: map[string]error{"": ErrUnacceptableCredential}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			recs, results := PlanAlterScramCredentials(img, tt.dels, tt.ups)
			if len(recs) != tt.recs || len(results) != len(tt.want) {
				t.Fatalf("%d records, results %+v", len(recs), results)
			}
			for _, r := range results {
				want := tt.want[r.User]
				if (want == nil) != (r.Err == nil) || want != nil && !errors.Is(r.Err, want) {
					t.Errorf("user %q: %v, want %v", r.User, r.Err, want)
				}
			}
			if _, err := metadata.ApplyAll(img, recs); err != nil {
				t.Fatalf("planned records do not apply: %v", err)
			}
		})
	}
}
