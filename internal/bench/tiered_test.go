package bench

import "testing"

func TestMedianRate(t *testing.T) {
	rates := func(rs ...float64) []Result {
		out := make([]Result, len(rs))
		for i, r := range rs {
			out[i].RecordsPerSec = r
		}
		return out
	}
	for _, tc := range []struct {
		in   []Result
		want float64
	}{
		{nil, 0},
		{rates(5), 5},
		{rates(9, 1, 5), 5},
		{rates(9, 1, 5, 3), 4},
	} {
		if got := medianRate(tc.in); got != tc.want {
			t.Errorf("medianRate(%v) = %g, want %g", tc.in, got, tc.want)
		}
	}
	if ratio(1, 0) != 0 || ratio(3, 4) != 0.75 {
		t.Error("ratio")
	}
}
