package group

import "testing"

func TestPartitionFor(t *testing.T) {
	// hash is Java's "s".hashCode(): the first entries are well known
	// ("polygenelubricants" hashes to Integer.MIN_VALUE, "Aa" and "BB" collide);
	// the others were computed independently over UTF-16 code units.
	tests := []struct {
		group string
		hash  int32
		n     int32
		want  int32
	}{
		{"", 0, 50, 0},
		{"a", 97, 50, 47},
		{"hello", 99162322, 50, 22},
		{"polygenelubricants", -2147483648, 50, 0}, // Utils.abs(MIN_VALUE) = 0
		{"Aa", 2112, 50, 12},
		{"BB", 2112, 50, 12},
		{"€", 8364, 50, 14},               // one UTF-16 unit, three UTF-8 bytes
		{"😀", 1772899, 50, 49},            // a surrogate pair: two units
		{"my-group", -1906497762, 50, 36}, // negative hash: sign bit masked, not negated
		{"my-group", -1906497762, 7, 1},
		{"console-consumer-61537", 163045213, 50, 13},
		{"strata-group-with-a-long-name-0001", 1328370983, 50, 33},
		{"日本語グループ", -305235731, 50, 17},
		{"hello", 99162322, 1, 0},
		{"hello", 99162322, 0, 0},  // no partitions: 0, not a panic
		{"hello", 99162322, -3, 0}, // likewise
	}
	for _, tt := range tests {
		if got := javaStringHash(tt.group); got != tt.hash {
			t.Errorf("javaStringHash(%q) = %d, want %d", tt.group, got, tt.hash)
		}
		if got := PartitionFor(tt.group, tt.n); got != tt.want {
			t.Errorf("PartitionFor(%q, %d) = %d, want %d", tt.group, tt.n, got, tt.want)
		}
	}
}

func TestPartitionForInvalidUTF8(t *testing.T) {
	// An invalid byte counts as U+FFFD, as Java's UTF-8 decoder substitutes it.
	if got, want := javaStringHash("\xff"), javaStringHash("\uFFFD"); got != want {
		t.Fatalf("hash of invalid byte = %d, want %d", got, want)
	}
}
