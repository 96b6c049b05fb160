package group

import "unicode/utf16"

// PartitionFor returns the partition of __consumer_offsets that owns groupID, the way
// Kafka places groups: abs(groupID.hashCode()) % numPartitions, where hashCode is Java's
// String.hashCode over the UTF-16 code units of the id and abs is Kafka's Utils.abs
// (x & 0x7fffffff, so Integer.MIN_VALUE maps to 0). It returns 0 when numPartitions is
// not positive.
//
// Java decodes the group id from UTF-8 on the wire; an invalid byte becomes U+FFFD
// here, as it does in Java's decoder for a lone bad byte.
func PartitionFor(groupID string, numPartitions int32) int32 {
	if numPartitions <= 0 {
		return 0
	}
	return (javaStringHash(groupID) & 0x7fffffff) % numPartitions
}

// javaStringHash is java.lang.String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over
// UTF-16 code units, in wrapping int32 arithmetic.
func javaStringHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			h = 31*h + hi
			h = 31*h + lo
			continue
		}
		h = 31*h + r
	}
	return h
}
