package metadata

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// DelegationToken is one delegation token (KIP-48) as the cluster keeps it:
// who owns it, who asked for it, who may renew it and its three times. The
// token's secret (its HMAC) is not stored: every node derives it from the
// token id and the cluster's token secret key. Never modify one taken from an
// image.
type DelegationToken struct {
	ID        string   // a random UUID, also the SCRAM user name of token logins
	Owner     string   // the principal the token authenticates as, "User:alice"
	Requester string   // the principal that created it (KIP-373)
	Renewers  []string // principals besides the owner that may renew or expire it
	// Times in milliseconds since the Unix epoch. ExpiryTimestamp is at most
	// MaxTimestamp; renewals move it, never past MaxTimestamp.
	IssueTimestamp, ExpiryTimestamp, MaxTimestamp int64
}

// Expired reports whether the token is past its expiry or its maximum
// lifetime at nowMs, as Kafka's controller decides it (strictly after).
func (t *DelegationToken) Expired(nowMs int64) bool {
	return t.ExpiryTimestamp < nowMs || t.MaxTimestamp < nowMs
}

// OwnerOrRenewer reports whether principal owns or may renew the token.
func (t *DelegationToken) OwnerOrRenewer(principal string) bool {
	return t.Owner == principal || slices.Contains(t.Renewers, principal)
}

// DelegationTokenRecord (type 23, version 0) creates a token, or replaces it
// (a renewal or an expiry moves ExpiryTimestamp; the rest stays).
type DelegationTokenRecord struct {
	DelegationToken
}

// RemoveDelegationTokenRecord (type 24, version 0) removes a token: expired
// on request, or past its expiry when the controller swept it.
type RemoveDelegationTokenRecord struct {
	ID string
}

func (*DelegationTokenRecord) Type() RecordType       { return TypeDelegationToken }
func (*RemoveDelegationTokenRecord) Type() RecordType { return TypeRemoveDelegationToken }

func (r *DelegationTokenRecord) appendBody(b []byte) []byte {
	b = appendString(b, r.ID)
	b = appendString(b, r.Owner)
	b = appendString(b, r.Requester)
	b = appendStrings(b, r.Renewers)
	b = appendInt64(b, r.IssueTimestamp)
	b = appendInt64(b, r.ExpiryTimestamp)
	return appendInt64(b, r.MaxTimestamp)
}

func (r *DelegationTokenRecord) readBody(rd *reader) {
	r.ID = rd.string()
	r.Owner = rd.string()
	r.Requester = rd.string()
	r.Renewers = rd.strings()
	r.IssueTimestamp = rd.int64()
	r.ExpiryTimestamp = rd.int64()
	r.MaxTimestamp = rd.int64()
}

func (r *RemoveDelegationTokenRecord) appendBody(b []byte) []byte { return appendString(b, r.ID) }
func (r *RemoveDelegationTokenRecord) readBody(rd *reader)        { r.ID = rd.string() }

func appendStrings(b []byte, ss []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		b = appendString(b, s)
	}
	return b
}

// strings reads what appendStrings wrote; an empty list reads as nil.
func (r *reader) strings() []string {
	n := r.count(1)
	var out []string
	for i := 0; i < n && r.err == nil; i++ {
		out = append(out, r.string())
	}
	return out
}

// validPrincipal: "Type:name" with both parts non-empty.
func validPrincipal(p string) bool {
	typ, name, ok := strings.Cut(p, ":")
	return ok && typ != "" && name != ""
}

func (b *builder) delegationToken(r *DelegationTokenRecord) error {
	t := r.DelegationToken
	switch {
	case t.ID == "":
		return fmt.Errorf("%w: delegation token without an id", ErrInvalidRequest)
	case !validPrincipal(t.Owner) || !validPrincipal(t.Requester):
		return fmt.Errorf("%w: delegation token %s: owner %q or requester %q is not a principal", ErrInvalidRequest, t.ID, t.Owner, t.Requester)
	case t.ExpiryTimestamp > t.MaxTimestamp:
		return fmt.Errorf("%w: delegation token %s expires after its maximum lifetime", ErrInvalidRequest, t.ID)
	}
	if old, ok := b.img.tokens[t.ID]; ok && (old.Owner != t.Owner || old.IssueTimestamp != t.IssueTimestamp) {
		return fmt.Errorf("%w: delegation token %s changes its owner or issue time", ErrInvalidRequest, t.ID)
	}
	b.mutTokens()
	t.Renewers = slices.Clone(t.Renewers)
	b.img.tokens[t.ID] = &t
	return nil
}

func (b *builder) removeDelegationToken(r *RemoveDelegationTokenRecord) error {
	if _, ok := b.img.tokens[r.ID]; !ok {
		return fmt.Errorf("%w: no delegation token %q", ErrResourceNotFound, r.ID)
	}
	b.mutTokens()
	delete(b.img.tokens, r.ID)
	return nil
}

func (b *builder) mutTokens() {
	if !b.ownTokens {
		b.img.tokens = cloneOrMake(b.img.tokens)
		b.ownTokens = true
	}
}

// DelegationToken returns the token with id.
func (img *Image) DelegationToken(id string) (*DelegationToken, bool) {
	t, ok := img.tokens[id]
	return t, ok
}

// DelegationTokens returns every token, by id.
func (img *Image) DelegationTokens() []*DelegationToken {
	out := make([]*DelegationToken, 0, len(img.tokens))
	for _, id := range slices.Sorted(maps.Keys(img.tokens)) {
		out = append(out, img.tokens[id])
	}
	return out
}

// tokenRecords are the records that rebuild the image's tokens.
func (img *Image) tokenRecords() []Record {
	var recs []Record
	for _, t := range img.DelegationTokens() {
		recs = append(recs, &DelegationTokenRecord{DelegationToken: *t})
	}
	return recs
}
