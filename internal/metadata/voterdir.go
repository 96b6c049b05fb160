package metadata

import (
	"fmt"
	"maps"
	"slices"
)

// VoterDirectoryRecord (type 34, version 0) records the data directory of
// controller voter NodeID's incarnation (its directory.id): the quorum's voter
// is the pair (NodeID, DirectoryID), as KIP-853's ReplicaKey. A zero
// DirectoryID forgets the voter's directory, which the controller does when
// the voter leaves the voter set.
//
// Raft connections to a voter with a recorded directory name it, and a node
// whose own directory differs refuses them (controllerlink), so a node
// restarted under a voter's id on an empty data dir never votes or counts
// towards a commit as that voter. The record is written only for nodes that
// report FeatureVoterDirectory, so a node of an older build is never sent
// what it cannot read. It goes in a Raft entry of its own: a build that
// predates the type refuses that entry only.
type VoterDirectoryRecord struct {
	NodeID      int32
	DirectoryID UUID
}

func (*VoterDirectoryRecord) Type() RecordType { return TypeVoterDirectory }

func (r *VoterDirectoryRecord) appendBody(b []byte) []byte {
	return append(appendInt32(b, r.NodeID), r.DirectoryID[:]...)
}

func (r *VoterDirectoryRecord) readBody(rd *reader) {
	r.NodeID = rd.int32()
	r.DirectoryID = rd.uuid()
}

func (b *builder) voterDirectory(r *VoterDirectoryRecord) error {
	if r.NodeID < 0 {
		return fmt.Errorf("%w: voter %d", ErrInvalidRequest, r.NodeID)
	}
	if !b.ownVoterDirs {
		b.img.voterDirs = maps.Clone(b.img.voterDirs)
		if b.img.voterDirs == nil {
			b.img.voterDirs = make(map[int32]UUID)
		}
		b.ownVoterDirs = true
	}
	if r.DirectoryID.IsZero() {
		delete(b.img.voterDirs, r.NodeID)
	} else {
		b.img.voterDirs[r.NodeID] = r.DirectoryID
	}
	return nil
}

// VoterDirectory returns the recorded data directory of controller voter id,
// or the zero UUID when none is recorded.
func (img *Image) VoterDirectory(id int32) UUID { return img.voterDirs[id] }

// VoterDirectoryNodes returns the nodes with a recorded voter directory, in
// ascending order.
func (img *Image) VoterDirectoryNodes() []int32 { return slices.Sorted(maps.Keys(img.voterDirs)) }

func (img *Image) voterDirectoryRecords() []Record {
	var recs []Record
	for _, id := range img.VoterDirectoryNodes() {
		recs = append(recs, &VoterDirectoryRecord{NodeID: id, DirectoryID: img.voterDirs[id]})
	}
	return recs
}
