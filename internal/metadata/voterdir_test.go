package metadata

import (
	"errors"
	"slices"
	"testing"
)

// TestVoterDirectory: a voter's directory is recorded, replaced, kept by a
// snapshot and forgotten by a zero id; the voter's broker registration does
// not change it; a negative node id is refused.
func TestVoterDirectory(t *testing.T) {
	dirA, dirB := UUID{0xa, 1}, UUID{0xb, 2}
	recorded := mustApply(t, baseImage(t), &VoterDirectoryRecord{NodeID: 1, DirectoryID: dirA},
		&VoterDirectoryRecord{NodeID: 3, DirectoryID: dirB})
	fromSnapshot, err := DecodeSnapshot(EncodeSnapshot(recorded))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		img   *Image
		want1 UUID
		nodes []int32
	}{
		{"none recorded", baseImage(t), UUID{}, nil},
		{"recorded", recorded, dirA, []int32{1, 3}},
		{"replaced", mustApply(t, recorded, &VoterDirectoryRecord{NodeID: 1, DirectoryID: dirB}), dirB, []int32{1, 3}},
		{"forgotten", mustApply(t, recorded, &VoterDirectoryRecord{NodeID: 1}), UUID{}, []int32{3}},
		{"broker registered again", mustApply(t, recorded, register(1, 5),
			&BrokerDirectoryRecord{BrokerID: 1, Epoch: 5, DirectoryID: dirB}), dirA, []int32{1, 3}},
		{"through a snapshot", fromSnapshot, dirA, []int32{1, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.img.VoterDirectory(1); got != tc.want1 {
				t.Errorf("VoterDirectory(1) = %v, want %v", got, tc.want1)
			}
			if got := tc.img.VoterDirectoryNodes(); !slices.Equal(got, tc.nodes) {
				t.Errorf("VoterDirectoryNodes() = %v, want %v", got, tc.nodes)
			}
		})
	}
	if recorded.VoterDirectory(1) != dirA {
		t.Error("a later record changed an earlier image")
	}
	if _, err := Apply(recorded, &VoterDirectoryRecord{NodeID: -1, DirectoryID: dirA}); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("negative node id: %v, want ErrInvalidRequest", err)
	}
}
