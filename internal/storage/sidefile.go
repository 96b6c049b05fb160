package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"

	"github.com/strata-stream/strata/internal/vfs"
)

// Side files (checkpoints and the clean-shutdown marker) are small framed files,
// replaced atomically. The frame, big-endian:
//
//	len u32 | crc u32 | version u16 | payload (len bytes)
//
// crc is CRC-32C over version and payload.
const (
	sideHeaderSize = 10
	sideVersion    = 1
	tmpSuffix      = ".tmp"
	maxSidePayload = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// frameSide returns payload in a side-file frame.
func frameSide(payload []byte) []byte { return frameSideVersion(payload, sideVersion) }

// frameSideVersion returns payload in a side-file frame of the given version:
// for a payload whose shape changed, which its reader tells apart by it.
func frameSideVersion(payload []byte, version uint16) []byte {
	b := make([]byte, sideHeaderSize, sideHeaderSize+len(payload))
	binary.BigEndian.PutUint32(b[0:], uint32(len(payload)))
	binary.BigEndian.PutUint16(b[8:], version)
	b = append(b, payload...)
	binary.BigEndian.PutUint32(b[4:], crc32.Checksum(b[8:], castagnoli))
	return b
}

// unframeSide checks a side-file frame of version sideVersion and returns its
// payload.
func unframeSide(b []byte) ([]byte, error) {
	payload, v, err := unframeSideVersion(b)
	if err == nil && v != sideVersion {
		return nil, fmt.Errorf("%w: version %d", ErrCorruptSideFile, v)
	}
	return payload, err
}

// unframeSideVersion checks a side-file frame and returns its payload and
// version; the caller checks the version.
func unframeSideVersion(b []byte) ([]byte, uint16, error) {
	if len(b) < sideHeaderSize {
		return nil, 0, fmt.Errorf("%w: %d bytes", ErrCorruptSideFile, len(b))
	}
	n := binary.BigEndian.Uint32(b[0:])
	if n > maxSidePayload || int64(n) != int64(len(b)-sideHeaderSize) {
		return nil, 0, fmt.Errorf("%w: length %d for %d bytes", ErrCorruptSideFile, n, len(b))
	}
	if crc32.Checksum(b[8:], castagnoli) != binary.BigEndian.Uint32(b[4:]) {
		return nil, 0, fmt.Errorf("%w: crc mismatch", ErrCorruptSideFile)
	}
	return b[sideHeaderSize:], binary.BigEndian.Uint16(b[8:]), nil
}

// writeSideFile replaces dir/name with payload durably: write name.tmp, fsync it,
// rename it over name, fsync dir.
func writeSideFile(fsys vfs.FS, dir, name string, payload []byte) error {
	return putSideFile(fsys, dir, name, frameSide(payload), true)
}

// writeSideFileVersion is writeSideFile with a frame of the given version.
func writeSideFileVersion(fsys vfs.FS, dir, name string, payload []byte, version uint16) error {
	return putSideFile(fsys, dir, name, frameSideVersion(payload, version), true)
}

// replaceSideFile is writeSideFile, without its two fsyncs unless durable (a
// file a crash may lose or tear, whose reader then falls back).
func replaceSideFile(fsys vfs.FS, dir, name string, payload []byte, durable bool) error {
	return putSideFile(fsys, dir, name, frameSide(payload), durable)
}

// putSideFile replaces dir/name with the frame framed (replaceSideFile).
func putSideFile(fsys vfs.FS, dir, name string, framed []byte, durable bool) error {
	path := filepath.Join(dir, name)
	tmp := path + tmpSuffix
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(framed); err != nil {
		f.Close()
		return err
	}
	if durable {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return err
	}
	if !durable {
		return nil
	}
	return fsys.SyncDir(dir)
}

// readSideFile returns the payload of dir/name, a frame of version
// sideVersion. A missing file gives an error matching fs.ErrNotExist; a
// damaged one ErrCorruptSideFile.
func readSideFile(fsys vfs.FS, dir, name string) ([]byte, error) {
	payload, v, err := readSideFileVersion(fsys, dir, name)
	if err == nil && v != sideVersion {
		return nil, fmt.Errorf("%w: version %d", ErrCorruptSideFile, v)
	}
	return payload, err
}

// readSideFileVersion is readSideFile for a frame of any version, which it
// returns for the caller to check.
func readSideFileVersion(fsys vfs.FS, dir, name string) ([]byte, uint16, error) {
	f, err := fsys.Open(filepath.Join(dir, name))
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, 0, err
	}
	if size > maxSidePayload+sideHeaderSize {
		return nil, 0, fmt.Errorf("%w: %d bytes", ErrCorruptSideFile, size)
	}
	b := make([]byte, size)
	if n, err := f.ReadAt(b, 0); n < len(b) {
		return nil, 0, fmt.Errorf("read %s: %d of %d bytes: %w", name, n, len(b), err)
	}
	return unframeSideVersion(b)
}

// removeDurably deletes dir/name if it exists and makes the removal durable.
func removeDurably(fsys vfs.FS, dir, name string) error {
	if err := fsys.Remove(filepath.Join(dir, name)); err != nil {
		if isNotExist(err) {
			return nil
		}
		return err
	}
	return fsys.SyncDir(dir)
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
