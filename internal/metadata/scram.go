package metadata

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
)

// ScramMechanism numbers a SCRAM mechanism as Kafka's ScramMechanism does (the
// values of AlterUserScramCredentials and DescribeUserScramCredentials).
type ScramMechanism int8

// The SCRAM mechanisms.
const (
	ScramSHA256 ScramMechanism = 1
	ScramSHA512 ScramMechanism = 2
)

// String is the SASL mechanism name.
func (m ScramMechanism) String() string {
	switch m {
	case ScramSHA256:
		return "SCRAM-SHA-256"
	case ScramSHA512:
		return "SCRAM-SHA-512"
	}
	return fmt.Sprintf("ScramMechanism(%d)", int8(m))
}

// SCRAM iteration bounds (Kafka's).
const (
	MinScramIterations = 4096
	MaxScramIterations = 16384
)

// ScramCredential is one user's credential for one SCRAM mechanism: the salt,
// the iteration count and the keys derived from the salted password. The
// password is never stored. Never modify one taken from an image.
type ScramCredential struct {
	User       string
	Mechanism  ScramMechanism
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// ScramCredentialRecord sets one user's credential for one mechanism (replacing
// the previous one), or with Delete removes it; then only User and Mechanism
// count, and the credential must exist.
type ScramCredentialRecord struct {
	ScramCredential
	Delete bool
}

func (*ScramCredentialRecord) Type() RecordType { return TypeScramCredential }

func (r *ScramCredentialRecord) appendBody(b []byte) []byte {
	b = appendString(b, r.User)
	b = append(b, byte(r.Mechanism))
	b = appendString(b, string(r.Salt))
	b = appendString(b, string(r.StoredKey))
	b = appendString(b, string(r.ServerKey))
	b = appendInt32(b, r.Iterations)
	return appendBool(b, r.Delete)
}

func (r *ScramCredentialRecord) readBody(rd *reader) {
	r.User = rd.string()
	r.Mechanism = ScramMechanism(rd.uint8())
	r.Salt = bytesOrNil(rd.string())
	r.StoredKey = bytesOrNil(rd.string())
	r.ServerKey = bytesOrNil(rd.string())
	r.Iterations = rd.int32()
	r.Delete = rd.bool()
}

// bytesOrNil keeps an empty field nil, so a record decodes to what was encoded.
func bytesOrNil(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

// ValidateScramCredential checks what a ScramCredentialRecord may set.
func ValidateScramCredential(user string, mech ScramMechanism, iterations int32) error {
	if user == "" {
		return fmt.Errorf("%w: empty user name", ErrInvalidRequest)
	}
	if mech != ScramSHA256 && mech != ScramSHA512 {
		return fmt.Errorf("%w: %v", ErrUnsupportedSaslMechanism, mech)
	}
	if iterations < MinScramIterations || iterations > MaxScramIterations {
		return fmt.Errorf("%w: %d iterations, want %d..%d", ErrInvalidRequest, iterations, MinScramIterations, MaxScramIterations)
	}
	return nil
}

func (b *builder) scramCredential(r *ScramCredentialRecord) error {
	if r.Delete {
		if _, ok := b.img.ScramCredential(r.User, r.Mechanism); !ok {
			return fmt.Errorf("%w: no %v credential for user %q", ErrResourceNotFound, r.Mechanism, r.User)
		}
	} else {
		if err := ValidateScramCredential(r.User, r.Mechanism, r.Iterations); err != nil {
			return err
		}
		if len(r.Salt) == 0 || len(r.StoredKey) == 0 || len(r.ServerKey) == 0 {
			return fmt.Errorf("%w: empty salt or key", ErrInvalidRequest)
		}
	}
	if !b.ownScram {
		b.img.scram = cloneOrMake(b.img.scram)
		b.ownScram = true
	}
	creds := maps.Clone(b.img.scram[r.User])
	if r.Delete {
		delete(creds, r.Mechanism)
	} else {
		if creds == nil {
			creds = make(map[ScramMechanism]*ScramCredential)
		}
		c := r.ScramCredential
		c.Salt, c.StoredKey, c.ServerKey = bytes.Clone(c.Salt), bytes.Clone(c.StoredKey), bytes.Clone(c.ServerKey)
		creds[r.Mechanism] = &c
	}
	if len(creds) == 0 {
		delete(b.img.scram, r.User)
	} else {
		b.img.scram[r.User] = creds
	}
	return nil
}

// ScramCredential returns user's credential for mech.
func (img *Image) ScramCredential(user string, mech ScramMechanism) (*ScramCredential, bool) {
	c, ok := img.scram[user][mech]
	return c, ok
}

// ScramUsers returns the users with at least one SCRAM credential, sorted.
func (img *Image) ScramUsers() []string {
	return slices.Sorted(maps.Keys(img.scram))
}

// ScramCredentials returns user's credentials, by mechanism number.
func (img *Image) ScramCredentials(user string) []*ScramCredential {
	var out []*ScramCredential
	for _, m := range []ScramMechanism{ScramSHA256, ScramSHA512} {
		if c, ok := img.scram[user][m]; ok {
			out = append(out, c)
		}
	}
	return out
}

// scramRecords are the records that rebuild the image's credentials.
func (img *Image) scramRecords() []Record {
	var recs []Record
	for _, user := range img.ScramUsers() {
		for _, c := range img.ScramCredentials(user) {
			recs = append(recs, &ScramCredentialRecord{ScramCredential: *c})
		}
	}
	return recs
}
