package chaos

import (
	"slices"
	"testing"
)

// TestFindGaps: the ranges of [start, end) a read of every offset left out,
// whatever the order and repeats of what it returned.
func TestFindGaps(t *testing.T) {
	for _, tc := range []struct {
		name       string
		start, end int64
		offsets    []int64
		want       []offsetGap
	}{
		{"dense", 0, 5, []int64{0, 1, 2, 3, 4}, nil},
		{"empty range", 3, 3, nil, nil},
		{"nothing read", 2, 5, nil, []offsetGap{{2, 5}}},
		{"one offset in the middle", 0, 6, []int64{0, 1, 2, 4, 5}, []offsetGap{{3, 4}}},
		{"head and tail", 10, 20, []int64{12, 13, 14, 15, 16, 17}, []offsetGap{{10, 12}, {18, 20}}},
		{"unordered with repeats (a reset re-read)", 0, 6, []int64{3, 0, 1, 1, 5, 0, 3}, []offsetGap{{2, 3}, {4, 5}}},
		{"below the start and at or past the end ignored", 5, 8, []int64{2, 5, 6, 7, 8, 9}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := findGaps(tc.start, tc.end, tc.offsets); !slices.Equal(got, tc.want) {
				t.Fatalf("findGaps(%d, %d, %v) = %v, want %v", tc.start, tc.end, tc.offsets, got, tc.want)
			}
		})
	}
}
