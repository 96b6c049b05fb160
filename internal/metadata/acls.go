package metadata

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/acl"
)

// AclRecord adds one ACL binding, or with Delete removes it (it must exist).
// A binding is its whole tuple: adding one that exists is an error.
type AclRecord struct {
	Binding acl.Binding
	Delete  bool
}

func (*AclRecord) Type() RecordType { return TypeAcl }

func (r *AclRecord) appendBody(b []byte) []byte {
	x := r.Binding
	b = append(b, byte(x.ResourceType))
	b = appendString(b, x.ResourceName)
	b = append(b, byte(x.PatternType))
	b = appendString(b, x.Principal)
	b = appendString(b, x.Host)
	b = append(b, byte(x.Operation), byte(x.Permission))
	return appendBool(b, r.Delete)
}

func (r *AclRecord) readBody(rd *reader) {
	x := &r.Binding
	x.ResourceType = kmsg.ACLResourceType(rd.uint8())
	x.ResourceName = rd.string()
	x.PatternType = kmsg.ACLResourcePatternType(rd.uint8())
	x.Principal = rd.string()
	x.Host = rd.string()
	x.Operation = kmsg.ACLOperation(rd.uint8())
	x.Permission = kmsg.ACLPermissionType(rd.uint8())
	r.Delete = rd.bool()
}

func (b *builder) aclRecord(r *AclRecord) error {
	_, exists := b.img.acls[r.Binding]
	switch {
	case r.Delete && !exists:
		return fmt.Errorf("%w: ACL %+v does not exist", ErrInvalidRequest, r.Binding)
	case !r.Delete && exists:
		return fmt.Errorf("%w: ACL %+v exists", ErrInvalidRequest, r.Binding)
	case !r.Delete:
		if err := r.Binding.Validate(); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidRequest, err)
		}
	}
	if !b.ownAcls {
		b.img.acls = cloneOrMake(b.img.acls)
		b.ownAcls = true
	}
	if r.Delete {
		delete(b.img.acls, r.Binding)
	} else {
		b.img.acls[r.Binding] = struct{}{}
	}
	return nil
}

// ACLs returns every ACL binding, in a stable order.
func (img *Image) ACLs() []acl.Binding {
	return slices.SortedFunc(maps.Keys(img.acls), compareBindings)
}

// HasACL reports whether the binding exists.
func (img *Image) HasACL(b acl.Binding) bool {
	_, ok := img.acls[b]
	return ok
}

func compareBindings(a, b acl.Binding) int {
	return cmp.Or(
		cmp.Compare(a.ResourceType, b.ResourceType),
		cmp.Compare(a.ResourceName, b.ResourceName),
		cmp.Compare(a.PatternType, b.PatternType),
		cmp.Compare(a.Principal, b.Principal),
		cmp.Compare(a.Host, b.Host),
		cmp.Compare(a.Operation, b.Operation),
		cmp.Compare(a.Permission, b.Permission),
	)
}

// aclRecords are the records that rebuild the image's ACLs.
func (img *Image) aclRecords() []Record {
	var recs []Record
	for _, b := range img.ACLs() {
		recs = append(recs, &AclRecord{Binding: b})
	}
	return recs
}
