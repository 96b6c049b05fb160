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

func TestBrokerCost(t *testing.T) {
	c := brokerCost(processCounters{cpu: 1.5, write: 1e9}, processCounters{cpu: 2.5, write: 3e9}, 5e8)
	if c.CPUSeconds != 1 || c.WriteBytes != 2e9 || c.CPUPerGB != 2 || c.WrittenPerGB != 4 {
		t.Fatalf("brokerCost = %+v", c)
	}
	if c := brokerCost(processCounters{}, processCounters{cpu: 1}, 0); c.CPUPerGB != 0 {
		t.Fatalf("no bytes produced: %+v", c)
	}
	vs := []float64{3, 1, 2}
	if got := median(vs); got != 2 || vs[0] != 3 || vs[1] != 1 {
		t.Fatalf("median = %g, input now %v (the round ratios are printed in round order after their median)", got, vs)
	}
}
