package metadata

import (
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
)

func TestAcls(t *testing.T) {
	read := acl.Binding{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "orders", PatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: "User:alice", Host: "*", Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow}
	write := read
	write.Operation = kmsg.ACLOperationWrite
	img, err := ApplyAll(NewImage(), []Record{&AclRecord{Binding: write}, &AclRecord{Binding: read}})
	if err != nil {
		t.Fatal(err)
	}
	if got := img.ACLs(); !reflect.DeepEqual(got, []acl.Binding{read, write}) {
		t.Fatalf("ACLs %+v", got)
	}
	snap, err := DecodeSnapshot(EncodeSnapshot(img))
	if err != nil || !reflect.DeepEqual(snap.ACLs(), img.ACLs()) {
		t.Fatalf("snapshot: %v %+v", err, snap.ACLs())
	}
	next, err := Apply(img, &AclRecord{Binding: read, Delete: true})
	if err != nil || next.HasACL(read) || !img.HasACL(read) {
		t.Fatalf("delete: %v", err)
	}
	bad := read
	bad.Principal = "alice"
	for _, rec := range []*AclRecord{{Binding: read}, {Binding: read, Delete: true}, {Binding: bad}} {
		base := img
		if rec.Delete {
			base = next
		}
		if _, err := Apply(base, rec); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("Apply(%+v) = %v, want ErrInvalidRequest", rec, err)
		}
	}
}
