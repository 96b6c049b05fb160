package share

import "testing"

// A share fetch reads about what its acquisition can use, not the client's whole
// maxBytes: the first read is small, later ones follow the records' size.
func TestReadBytes(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		maxRecords, maxBytes int
		recordBytes          float64
		want                 int
	}{
		{"first read", 500, 50 << 20, 0, minReadBytes},
		{"first read, small request", 500, 1000, 0, 1000},
		{"1 KiB records", 500, 50 << 20, 1100, 1_100_000},
		{"tiny records", 500, 50 << 20, 10, minReadBytes},
		{"large records", 500, 50 << 20, 1 << 20, 50 << 20},
		{"request smaller than the estimate", 500, 100_000, 1100, 100_000},
	} {
		if got := readBytes(tc.maxRecords, tc.maxBytes, tc.recordBytes); got != tc.want {
			t.Errorf("%s: readBytes(%d, %d, %g) = %d, want %d", tc.name, tc.maxRecords, tc.maxBytes, tc.recordBytes, got, tc.want)
		}
	}
}
