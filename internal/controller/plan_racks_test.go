package controller

import (
	"fmt"
	"testing"

	"github.com/strata-stream/strata/internal/metadata"
)

// rackImage registers brokers 1..len(racks), broker i on racks[i-1] ("" : none).
func rackImage(t *testing.T, racks ...string) (*metadata.Image, []int32) {
	img := metadata.NewImage()
	var live []int32
	for i, r := range racks {
		id := int32(i + 1)
		img = apply(t, img, &metadata.RegisterBrokerRecord{BrokerID: id, Epoch: 1, Host: "127.0.0.1", Port: 9000 + id, Rack: r})
		live = append(live, id)
	}
	return img, live
}

func TestPlaceReplicasOnRacks(t *testing.T) {
	tests := []struct {
		name  string
		racks []string
		rf    int
		// minRacks is how many racks every partition must span.
		minRacks int
	}{
		{"3 racks of 2, rf 3", []string{"a", "a", "b", "b", "c", "c"}, 3, 3},
		{"3 racks of 2, rf 2", []string{"a", "b", "c", "a", "b", "c"}, 2, 2},
		{"2 racks, rf 3", []string{"a", "a", "a", "b", "b", "b"}, 3, 2},
		{"uneven racks, rf 3", []string{"a", "a", "a", "a", "b", "c"}, 3, 3},
		{"one broker without a rack", []string{"a", "a", "b", "b", ""}, 3, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			img, live := rackImage(t, tc.racks...)
			for start := 0; start < 2*len(live); start++ {
				n := 3 * len(live)
				out := placeReplicasOnRacks(img, live, n, tc.rf, start)
				leaders, replicas := map[int32]int{}, map[int32]int{}
				for p, rs := range out {
					if len(rs) != tc.rf {
						t.Fatalf("partition %d: replicas %v, want %d", p, rs, tc.rf)
					}
					spanned := map[string]bool{}
					for j, r := range rs {
						for _, prev := range rs[:j] {
							if prev == r {
								t.Fatalf("partition %d: broker %d twice in %v", p, r, rs)
							}
						}
						rack := tc.racks[r-1]
						if rack == "" {
							rack = fmt.Sprint("own-", r)
						}
						spanned[rack] = true
						replicas[r]++
					}
					if len(spanned) < tc.minRacks {
						t.Fatalf("start %d partition %d: replicas %v span %d racks, want %d", start, p, rs, len(spanned), tc.minRacks)
					}
					leaders[rs[0]]++
				}
				if spread(leaders, live) > 1 {
					t.Errorf("start %d: leaders %v are uneven", start, leaders)
				}
			}
		})
	}
}

func TestPlaceReplicasWithoutRacksIsUnchanged(t *testing.T) {
	img, live := rackImage(t, "", "", "", "")
	got := placeReplicasOnRacks(img, live, 8, 3, 5)
	want := placeReplicas(live, 8, 3, 5)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("without racks: %v, want placeReplicas' %v", got, want)
	}
	img, live = rackImage(t, "a", "a", "a")
	if got, want := placeReplicasOnRacks(img, live, 6, 2, 0), placeReplicas(live, 6, 2, 0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("one rack: %v, want placeReplicas' %v", got, want)
	}
}
