package metadata

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

const (
	snapshotMagic   = "STMS"
	snapshotVersion = 1
	// snapshotHeaderLen is magic, version and offset; the trailer is a CRC-32C.
	snapshotHeaderLen = len(snapshotMagic) + 1 + 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodeSnapshot encodes img (its records and offset) for a Raft snapshot; see
// the package documentation for the layout.
func EncodeSnapshot(img *Image) []byte {
	return sealSnapshot(img.offset, EncodeBatch(img.Records()))
}

// sealSnapshot frames an encoded record batch as a snapshot at offset: the
// header before it, the checksum after.
func sealSnapshot(offset uint64, batch []byte) []byte {
	b := append([]byte(snapshotMagic), snapshotVersion)
	b = binary.BigEndian.AppendUint64(b, offset)
	b = append(b, batch...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// DecodeSnapshot rebuilds the image encoded by EncodeSnapshot.
func DecodeSnapshot(b []byte) (*Image, error) {
	if len(b) < snapshotHeaderLen+4 || string(b[:len(snapshotMagic)]) != snapshotMagic {
		return nil, fmt.Errorf("%w: not a metadata snapshot", ErrCorrupt)
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: snapshot checksum mismatch", ErrCorrupt)
	}
	if v := body[len(snapshotMagic)]; v != snapshotVersion {
		return nil, fmt.Errorf("%w: snapshot version %d", ErrUnsupportedVersion, v)
	}
	offset := binary.BigEndian.Uint64(body[len(snapshotMagic)+1:])
	recs, err := DecodeBatch(body[snapshotHeaderLen:])
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	img, err := ApplyAll(NewImage(), recs)
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot does not apply: %v", ErrCorrupt, err)
	}
	return img.WithOffset(offset), nil
}
