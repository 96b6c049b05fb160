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
		up("alice", metadata.ScramSHA512, 8192),
		up("bob", metadata.ScramSHA256, 4096),
	})
	if len(recs) != 3 || len(results) != 2 || results[0].Err != nil || results[1].Err != nil {
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
		{name: "duplicate fails the whole user", dels: []ScramDeletion{{"alice", metadata.ScramSHA256}},
			ups:  []ScramUpsertion{up("alice", metadata.ScramSHA256, 4096), up("bob", metadata.ScramSHA512, 4096)},
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
