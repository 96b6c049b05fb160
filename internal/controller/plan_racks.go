package controller

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/strata-stream/strata/internal/metadata"
)

// placeReplicasOnRacks is placeReplicas made rack-aware (Kafka's rack-aware
// assignment) when the live brokers name more than one rack: the brokers are
// ordered so that neighbours sit on different racks, each partition's preferred
// leader walks round-robin over that order, and its followers are the next
// brokers in it whose rack the partition does not use yet, until every rack
// holds one of its replicas; only then may a rack hold a second. Leaders stay
// even, and a partition with rf <= the number of racks survives the loss of a
// whole rack. A broker without a rack counts as a rack of its own.
func placeReplicasOnRacks(img *metadata.Image, live []int32, n, rf, start int) [][]int32 {
	rackOf := map[int32]string{}
	racks := map[string]bool{}
	for _, id := range live {
		r := ""
		if b := img.Broker(id); b != nil {
			r = b.Rack
		}
		if r == "" {
			r = "\x00broker " + strconv.Itoa(int(id)) // its own rack
		}
		rackOf[id] = r
		racks[r] = true
	}
	if len(racks) < 2 || !anyRack(img, live) {
		return placeReplicas(live, n, rf, start)
	}
	ordered := rackAlternated(live, rackOf)
	b := len(ordered)
	out := make([][]int32, n)
	for p := range out {
		pos := start + p
		first := pos % b
		shift := 0
		if b > 1 {
			shift = (pos / b) % (b - 1)
		}
		replicas := []int32{ordered[first]}
		used := map[string]int{rackOf[ordered[first]]: 1}
		// Followers: the brokers after the leader (skipped ahead by shift, as
		// placeReplicas does), first those on racks with the fewest replicas.
		for round := 0; len(replicas) < rf; round++ {
			for k := 0; k < b-1 && len(replicas) < rf; k++ {
				id := ordered[(first+1+(shift+k)%(b-1))%b]
				if slices.Contains(replicas, id) || used[rackOf[id]] > round {
					continue
				}
				replicas = append(replicas, id)
				used[rackOf[id]]++
			}
		}
		out[p] = replicas
	}
	return out
}

// anyRack reports whether some live broker names a rack.
func anyRack(img *metadata.Image, live []int32) bool {
	return slices.ContainsFunc(live, func(id int32) bool {
		b := img.Broker(id)
		return b != nil && b.Rack != ""
	})
}

// rackAlternated orders brokers round-robin over their racks (racks by name,
// brokers of a rack by id), so that neighbours sit on different racks.
func rackAlternated(live []int32, rackOf map[int32]string) []int32 {
	byRack := map[string][]int32{}
	for _, id := range live {
		byRack[rackOf[id]] = append(byRack[rackOf[id]], id)
	}
	names := make([]string, 0, len(byRack))
	for r, ids := range byRack {
		slices.Sort(ids)
		names = append(names, r)
	}
	slices.SortFunc(names, cmp.Compare)
	out := make([]int32, 0, len(live))
	for i := 0; len(out) < len(live); i++ {
		for _, r := range names {
			if i < len(byRack[r]) {
				out = append(out, byRack[r][i])
			}
		}
	}
	return out
}
