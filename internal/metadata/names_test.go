package metadata

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestValidateTopicName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"orders", true},
		{"a", true},
		{"Orders.v2_final-1", true},
		{"__consumer_offsets", true},
		{"...", true},
		{strings.Repeat("x", 249), true},
		{"", false},
		{".", false},
		{"..", false},
		{strings.Repeat("x", 250), false},
		{"with space", false},
		{"slash/topic", false},
		{"ümlaut", false},
		{"tab\t", false},
	}
	for _, tt := range tests {
		err := ValidateTopicName(tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateTopicName(%q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidTopic) {
			t.Errorf("ValidateTopicName(%q) = %v, want ErrInvalidTopic", tt.name, err)
		}
	}
}

func TestUUID(t *testing.T) {
	rnd := rand.NewChaCha8([32]byte{1})
	seen := map[UUID]bool{}
	for range 1000 {
		u, err := NewUUID(rnd)
		if err != nil {
			t.Fatal(err)
		}
		if u.IsZero() || seen[u] {
			t.Fatalf("uuid %v zero or repeated", u)
		}
		seen[u] = true
		if u[6]>>4 != 4 || u[8]>>6 != 2 {
			t.Fatalf("uuid %x: not version 4 / RFC 4122 variant", u)
		}
		s := u.String()
		if len(s) != 22 || s[0] == '-' {
			t.Fatalf("uuid text %q", s)
		}
		back, err := ParseUUID(s)
		if err != nil || back != u {
			t.Fatalf("ParseUUID(%q) = %v, %v; want %v", s, back, err, u)
		}
	}
	for _, bad := range []string{"", "short", strings.Repeat("A", 23), "AAAAAAAAAAAAAAAAAAAA+/", "AAAAAAAAAAAAAAAAAAAAA="} {
		if _, err := ParseUUID(bad); err == nil {
			t.Errorf("ParseUUID(%q) succeeded", bad)
		}
	}
	if _, err := NewUUID(strings.NewReader("too short")); err == nil {
		t.Error("NewUUID from a short reader succeeded")
	}
}
