package controllerlink

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// A Raft connection may open by naming the voter it is for, so that only
// that voter's incarnation takes it (KIP-853's ReplicaKey; see
// controller/voter_directory.go):
//
//	+------+---------------+------------------+----------------------
//	| 0xFE | int32 node id | 16-byte dir id   | Raft RPCs ...
//	+------+---------------+------------------+----------------------
//
// The listening node compares the name with its own node id and data
// directory id: the same, and the rest is the Raft connection; otherwise it
// closes the connection, so the sender finds the voter unreachable. A
// connection that opens with any other byte is not named and is taken as
// before (a node of an older build names none).

// VoterMarker opens a named Raft connection.
const VoterMarker byte = 0xFE

// voterNameLen is the length of a connection's name after the marker.
const voterNameLen = 4 + 16

// VoterKey names a controller voter's incarnation: its node id and its data
// directory's id.
type VoterKey struct {
	NodeID      int32
	DirectoryID [16]byte
}

func (k VoterKey) String() string {
	return fmt.Sprintf("%d/%s", k.NodeID, base64.RawURLEncoding.EncodeToString(k.DirectoryID[:]))
}

// VoterAddr is the address the Raft transport dials to reach voter k at
// addr: the stream layer (Mux.Raft) dials addr and opens the connection
// with k's name.
func VoterAddr(addr string, k VoterKey) string { return addr + "#" + k.String() }

// splitVoterAddr undoes VoterAddr; named is false for a plain address.
func splitVoterAddr(s string) (addr string, k VoterKey, named bool, err error) {
	addr, name, named := strings.Cut(s, "#")
	if !named {
		return s, VoterKey{}, false, nil
	}
	idStr, dirStr, ok := strings.Cut(name, "/")
	id, err1 := strconv.ParseInt(idStr, 10, 32)
	dir, err2 := base64.RawURLEncoding.DecodeString(dirStr)
	if !ok || err1 != nil || err2 != nil || len(dir) != 16 {
		return "", VoterKey{}, false, fmt.Errorf("controllerlink: bad voter address %q", s)
	}
	k.NodeID = int32(id)
	copy(k.DirectoryID[:], dir)
	return addr, k, true, nil
}

func appendVoterName(b []byte, k VoterKey) []byte {
	b = append(b, VoterMarker)
	b = binary.BigEndian.AppendUint32(b, uint32(k.NodeID))
	return append(b, k.DirectoryID[:]...)
}

func readVoterName(b []byte) VoterKey {
	var k VoterKey
	k.NodeID = int32(binary.BigEndian.Uint32(b))
	copy(k.DirectoryID[:], b[4:])
	return k
}

// writeVoterName opens c with k's name.
func writeVoterName(c net.Conn, k VoterKey) error {
	_, err := c.Write(appendVoterName(nil, k))
	return err
}
