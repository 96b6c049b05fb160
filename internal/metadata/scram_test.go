package metadata

import (
	"errors"
	"reflect"
	"testing"
)

func TestScramCredentials(t *testing.T) {
	set := func(user string, m ScramMechanism, salt string) *ScramCredentialRecord {
		return &ScramCredentialRecord{ScramCredential: ScramCredential{User: user, Mechanism: m, Salt: []byte(salt), StoredKey: []byte("stored"), ServerKey: []byte("server"), Iterations: 4096}}
	}
	img, err := ApplyAll(NewImage(), []Record{set("bob", ScramSHA256, "s1"), set("alice", ScramSHA512, "s2"), set("alice", ScramSHA256, "s3")})
	if err != nil {
		t.Fatal(err)
	}
	if got := img.ScramUsers(); !reflect.DeepEqual(got, []string{"alice", "bob"}) {
		t.Fatalf("users %v", got)
	}
	if cs := img.ScramCredentials("alice"); len(cs) != 2 || cs[0].Mechanism != ScramSHA256 || string(cs[1].Salt) != "s2" {
		t.Fatalf("alice's credentials %+v", cs)
	}
	// Replacing one credential leaves the previous image alone.
	next, err := Apply(img, set("alice", ScramSHA256, "s4"))
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := img.ScramCredential("alice", ScramSHA256); string(c.Salt) != "s3" {
		t.Fatal("the previous image changed")
	}
	if c, _ := next.ScramCredential("alice", ScramSHA256); string(c.Salt) != "s4" {
		t.Fatal("replace did not apply")
	}
	// Deleting the last credential removes the user.
	next, err = Apply(next, &ScramCredentialRecord{ScramCredential: ScramCredential{User: "bob", Mechanism: ScramSHA256}, Delete: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := next.ScramUsers(); !reflect.DeepEqual(got, []string{"alice"}) {
		t.Fatalf("users after delete %v", got)
	}
	// Snapshots carry the credentials.
	snap, err := DecodeSnapshot(EncodeSnapshot(next))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(snap.ScramCredentials("alice"), next.ScramCredentials("alice")) {
		t.Fatalf("snapshot lost credentials: %+v", snap.ScramCredentials("alice"))
	}

	for _, tt := range []struct {
		rec  *ScramCredentialRecord
		want error
	}{
		{&ScramCredentialRecord{ScramCredential: ScramCredential{User: "bob", Mechanism: ScramSHA256}, Delete: true}, ErrResourceNotFound},
		{&ScramCredentialRecord{ScramCredential: ScramCredential{User: "", Mechanism: ScramSHA256, Salt: []byte("s"), StoredKey: []byte("k"), ServerKey: []byte("k"), Iterations: 4096}}, ErrInvalidRequest},
		{&ScramCredentialRecord{ScramCredential: ScramCredential{User: "x", Mechanism: 3, Salt: []byte("s"), StoredKey: []byte("k"), ServerKey: []byte("k"), Iterations: 4096}}, ErrUnsupportedSaslMechanism},
		{&ScramCredentialRecord{ScramCredential: ScramCredential{User: "x", Mechanism: ScramSHA256, Salt: []byte("s"), StoredKey: []byte("k"), ServerKey: []byte("k"), Iterations: 100}}, ErrInvalidRequest},
		{&ScramCredentialRecord{ScramCredential: ScramCredential{User: "x", Mechanism: ScramSHA256, Iterations: 4096}}, ErrInvalidRequest},
	} {
		if _, err := Apply(next, tt.rec); !errors.Is(err, tt.want) {
			t.Errorf("Apply(%+v) = %v, want %v", tt.rec, err, tt.want)
		}
	}
}
