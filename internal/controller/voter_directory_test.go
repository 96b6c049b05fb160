package controller

import (
	"errors"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/strata-stream/strata/internal/metadata"
)

// TestPlanVoterDirectories: a voter's directory is recorded from its live
// registration only when that reports FeatureVoterDirectory and has a
// directory, and never replaces one recorded (a wiped voter's new registration
// does not make it the voter); a node that is no longer a voter has its
// directory forgotten.
func TestPlanVoterDirectories(t *testing.T) {
	dir, other := metadata.UUID{0xd}, metadata.UUID{0xe}
	feature := map[string]int32{metadata.FeatureVoterDirectory: 1}
	img := clusterImage(t, 2)
	withDir := func(img *metadata.Image, features map[string]int32) *metadata.Image {
		return apply(t, img, &metadata.BrokerFeaturesRecord{BrokerID: 1, Epoch: 1, Features: features},
			&metadata.BrokerDirectoryRecord{BrokerID: 1, Epoch: 1, DirectoryID: dir})
	}
	ready := withDir(img, feature)
	for _, tc := range []struct {
		name   string
		img    *metadata.Image
		voters []int32
		want   []metadata.Record
	}{
		{"recorded", ready, []int32{1, 2}, []metadata.Record{&metadata.VoterDirectoryRecord{NodeID: 1, DirectoryID: dir}}},
		{"not a voter", ready, []int32{2}, nil},
		{"without the feature", withDir(img, map[string]int32{metadata.FeatureOwedMarkers: 1}), []int32{1}, nil},
		{"without a directory", apply(t, img, &metadata.BrokerFeaturesRecord{BrokerID: 1, Epoch: 1, Features: feature}), []int32{1}, nil},
		{"fenced", fence(t, ready, 1), []int32{1}, nil},
		{"controller-only voter", ready, []int32{7}, nil},
		{"already recorded", apply(t, ready, &metadata.VoterDirectoryRecord{NodeID: 1, DirectoryID: other}), []int32{1}, nil},
		{"no longer a voter", apply(t, ready, &metadata.VoterDirectoryRecord{NodeID: 1, DirectoryID: other},
			&metadata.VoterDirectoryRecord{NodeID: 5, DirectoryID: other}), []int32{1, 2},
			[]metadata.Record{&metadata.VoterDirectoryRecord{NodeID: 5}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PlanVoterDirectories(tc.img, tc.voters); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("PlanVoterDirectories = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRegisterController: a controller-only voter's directory is recorded
// when it reports FeatureVoterDirectory, not otherwise nor for a node that is
// not a voter; reporting it again is a no-op, and another directory for the
// same voter is INVALID_VOTER_KEY, the recorded one kept.
func TestRegisterController(t *testing.T) {
	c := start(t, singleConfig(t.TempDir()))
	dir, other := metadata.UUID{0xd}, metadata.UUID{0xe}
	feature := map[string]int32{metadata.FeatureVoterDirectory: 1}
	for _, tc := range []struct {
		name     string
		id       int32
		dir      metadata.UUID
		features map[string]int32
		err      error
		want     metadata.UUID
	}{
		{"without the feature", 1, dir, map[string]int32{metadata.FeatureOwedMarkers: 1}, nil, metadata.UUID{}},
		{"not a voter", 9, dir, feature, nil, metadata.UUID{}},
		{"recorded", 1, dir, feature, nil, dir},
		{"again", 1, dir, feature, nil, dir},
		{"another directory", 1, other, feature, ErrInvalidVoterKey, dir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := c.RegisterController(ctxT(t), tc.id, tc.dir, tc.features); !errors.Is(err, tc.err) {
				t.Fatalf("RegisterController = %v, want %v", err, tc.err)
			}
			if got := c.Image().VoterDirectory(1); got != tc.want {
				t.Fatalf("voter 1's directory is %v, want %v", got, tc.want)
			}
			if got := c.Image().VoterDirectory(9); !got.IsZero() {
				t.Fatalf("node 9, not a voter, has directory %v", got)
			}
		})
	}
}

// TestScanVoterDirectories: the directories the local Raft log records are
// read at start, the last record of each node winning (a forgotten one is
// zero), whatever else the log holds.
func TestScanVoterDirectories(t *testing.T) {
	a, b := metadata.UUID{0xa}, metadata.UUID{0xb}
	store := raft.NewInmemStore()
	var logs []*raft.Log
	for i, data := range [][]byte{
		metadata.EncodeBatch([]metadata.Record{&metadata.VoterDirectoryRecord{NodeID: 3, DirectoryID: a}}),
		metadata.EncodeBatch([]metadata.Record{&metadata.RegisterBrokerRecord{BrokerID: 1, Epoch: 1}}),
		metadata.EncodeBatch([]metadata.Record{&metadata.VoterDirectoryRecord{NodeID: 1, DirectoryID: b},
			&metadata.VoterDirectoryRecord{NodeID: 3}}),
		[]byte("not a batch"),
	} {
		logs = append(logs, &raft.Log{Index: uint64(i + 2), Term: 1, Type: raft.LogCommand, Data: data})
	}
	logs = append([]*raft.Log{{Index: 1, Term: 1, Type: raft.LogConfiguration}}, logs...)
	if err := store.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	boot, err := scanVoterDirectories(store)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[int32]metadata.UUID{1: b, 3: {}}; boot.index != 5 || !reflect.DeepEqual(boot.dirs, want) {
		t.Fatalf("scan = %v up to %d, want %v up to 5", boot.dirs, boot.index, want)
	}
	empty, err := scanVoterDirectories(raft.NewInmemStore())
	if err != nil || len(empty.dirs) != 0 || empty.index != 0 {
		t.Fatalf("empty log: %+v, %v", empty, err)
	}
}
