package storage

import (
	"encoding/binary"
	"fmt"
)

// Side-file names inside a partition directory.
const (
	recoveryCheckpointName = "recovery-point.checkpoint"
	epochCheckpointName    = "leader-epoch.checkpoint"
	cleanShutdownName      = "clean-shutdown"
)

// recoveryCheckpoint is what survives between runs about the log's extent: every
// segment wholly below RecoveryPoint was fsynced with its indexes, so recovery may
// skip it; LogStartOffset is the first offset readers may see.
type recoveryCheckpoint struct {
	RecoveryPoint  int64
	LogStartOffset int64
}

// Payload: recoveryPoint i64 | logStartOffset i64.
func (c recoveryCheckpoint) encode() []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(c.RecoveryPoint))
	return binary.BigEndian.AppendUint64(b, uint64(c.LogStartOffset))
}

func decodeRecoveryCheckpoint(b []byte) (recoveryCheckpoint, error) {
	if len(b) != 16 {
		return recoveryCheckpoint{}, fmt.Errorf("%w: recovery checkpoint of %d bytes", ErrCorruptSideFile, len(b))
	}
	c := recoveryCheckpoint{
		RecoveryPoint:  int64(binary.BigEndian.Uint64(b)),
		LogStartOffset: int64(binary.BigEndian.Uint64(b[8:])),
	}
	if c.RecoveryPoint < 0 || c.LogStartOffset < 0 {
		return recoveryCheckpoint{}, fmt.Errorf("%w: negative offsets in recovery checkpoint", ErrCorruptSideFile)
	}
	return c, nil
}

// cleanShutdown is written by Close as its last step and removed by Open. It pins
// the shape of the log at close, so a marker that no longer matches the files (a
// crash after a failed removal, a copied directory) is ignored.
type cleanShutdown struct {
	LogEndOffset int64
	ActiveBase   int64 // base offset of the last segment
	ActiveSize   int64 // size of its .log file
}

// Payload: logEndOffset i64 | activeBase i64 | activeSize i64.
func (c cleanShutdown) encode() []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(c.LogEndOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(c.ActiveBase))
	return binary.BigEndian.AppendUint64(b, uint64(c.ActiveSize))
}

func decodeCleanShutdown(b []byte) (cleanShutdown, error) {
	if len(b) != 24 {
		return cleanShutdown{}, fmt.Errorf("%w: clean-shutdown marker of %d bytes", ErrCorruptSideFile, len(b))
	}
	return cleanShutdown{
		LogEndOffset: int64(binary.BigEndian.Uint64(b)),
		ActiveBase:   int64(binary.BigEndian.Uint64(b[8:])),
		ActiveSize:   int64(binary.BigEndian.Uint64(b[16:])),
	}, nil
}
