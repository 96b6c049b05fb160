package main

import "testing"

func TestParseCPUs(t *testing.T) {
	set, err := parseCPUs("0,3")
	if err != nil || !set.IsSet(0) || !set.IsSet(3) || set.IsSet(1) || set.Count() != 2 {
		t.Fatalf("parseCPUs(0,3) = %v, %v", set, err)
	}
	for _, bad := range []string{"", "a", "1-2", "-1"} {
		if _, err := parseCPUs(bad); err == nil {
			t.Errorf("parseCPUs(%q) accepted", bad)
		}
	}
}
