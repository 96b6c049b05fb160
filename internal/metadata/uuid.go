package metadata

import (
	"encoding/base64"
	"fmt"
	"io"
)

// UUID identifies a topic or a broker incarnation. Its text form is Kafka's:
// URL-safe base64 without padding (22 characters).
type UUID [16]byte

// NewUUID returns a random version-4 UUID read from rnd (crypto/rand.Reader in
// production, a seeded source in tests). Like Kafka it never returns an id whose
// text form starts with '-', which command lines would take for a flag.
func NewUUID(rnd io.Reader) (UUID, error) {
	for {
		var u UUID
		if _, err := io.ReadFull(rnd, u[:]); err != nil {
			return UUID{}, fmt.Errorf("metadata: reading random uuid: %w", err)
		}
		u[6] = u[6]&0x0f | 0x40 // version 4
		u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
		if u.String()[0] != '-' {
			return u, nil
		}
	}
}

// ParseUUID parses the text form produced by String.
func ParseUUID(s string) (UUID, error) {
	var u UUID
	if base64.RawURLEncoding.DecodedLen(len(s)) != len(u) {
		return UUID{}, fmt.Errorf("metadata: uuid %q: want 22 base64 characters", s)
	}
	n, err := base64.RawURLEncoding.Strict().Decode(u[:], []byte(s))
	if err != nil || n != len(u) {
		return UUID{}, fmt.Errorf("metadata: uuid %q: not URL-safe base64", s)
	}
	return u, nil
}

func (u UUID) String() string { return base64.RawURLEncoding.EncodeToString(u[:]) }

// IsZero reports whether u is the all-zero UUID, which Kafka uses for "no id".
func (u UUID) IsZero() bool { return u == UUID{} }
