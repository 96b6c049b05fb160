// Package boltstore is the controller's durable Raft log and stable store: a
// raft.LogStore and raft.StableStore in one bbolt file. (raft-boltdb does not
// build with the raft version Strata uses, and its format is msgpack; this one
// is small and framed.)
//
// Every method is safe for concurrent use; bbolt serialises writers, and each
// write is one transaction fsynced on commit before the method returns.
//
// # Format
//
// One bbolt file with two buckets:
//
//	bucket "logs"    key: log index, u64 big-endian (so bbolt's order is log order)
//	                 value: an encoded raft.Log, below
//	bucket "stable"  key: the raw key; value: the raw value (SetUint64 stores
//	                 8 bytes big-endian)
//
// An encoded raft.Log:
//
//	+------------+---------+---------+-----------+------------------+----------+------+----------+------------+
//	| crc32c u32 | version | type u8 | term u64  | appended-at i64  | data len | data | ext len  | extensions |
//	|            | u8 (1)  |         |           | (unix ns, 0=none)| uvarint  |      | uvarint  |            |
//	+------------+---------+---------+-----------+------------------+----------+------+----------+------------+
//
// Integers are big-endian. The CRC (Castagnoli) covers every byte after it; a
// mismatch, a short value or trailing bytes return an error wrapping ErrCorrupt
// rather than a wrong entry. The index is not repeated in the value: it is the key.
package boltstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

var (
	// ErrCorrupt: a stored log entry fails its checksum or does not parse. The
	// node must not continue on this log; restore it from a peer or a snapshot.
	ErrCorrupt = errors.New("boltstore: corrupt log entry")
)

var (
	bucketLogs   = []byte("logs")
	bucketStable = []byte("stable")
	castagnoli   = crc32.MakeTable(crc32.Castagnoli)
)

const (
	logVersion = 1
	// headerLen is crc, version, type, term and appended-at.
	headerLen = 4 + 1 + 1 + 8 + 8
	// openTimeout bounds the wait for the file lock another process holds.
	openTimeout = 2 * time.Second
)

// Store is a raft.LogStore and raft.StableStore backed by one bbolt file.
type Store struct {
	db *bolt.DB
}

var (
	_ raft.LogStore    = (*Store)(nil)
	_ raft.StableStore = (*Store)(nil)
)

// Open opens or creates the store at path.
func Open(path string) (*Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: openTimeout})
	if err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketLogs, bucketStable} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("boltstore: init %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }

// FirstIndex returns the first stored index, 0 if the log is empty.
func (s *Store) FirstIndex() (uint64, error) { return s.edgeIndex(true) }

// LastIndex returns the last stored index, 0 if the log is empty.
func (s *Store) LastIndex() (uint64, error) { return s.edgeIndex(false) }

func (s *Store) edgeIndex(first bool) (uint64, error) {
	var idx uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketLogs).Cursor()
		k, _ := c.Last()
		if first {
			k, _ = c.First()
		}
		if k != nil {
			idx = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return idx, err
}

// GetLog reads the entry at index into l, or returns raft.ErrLogNotFound.
func (s *Store) GetLog(index uint64, l *raft.Log) error {
	return s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketLogs).Get(indexKey(index))
		if v == nil {
			return raft.ErrLogNotFound
		}
		if err := DecodeLog(v, l); err != nil {
			return fmt.Errorf("index %d: %w", index, err)
		}
		l.Index = index
		return nil
	})
}

// StoreLog stores one entry.
func (s *Store) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs stores entries in one transaction.
func (s *Store) StoreLogs(logs []*raft.Log) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLogs)
		for _, l := range logs {
			if err := b.Put(indexKey(l.Index), EncodeLog(l)); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteRange deletes the entries from min to max, inclusive.
func (s *Store) DeleteRange(lo, hi uint64) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketLogs).Cursor()
		for k, _ := c.Seek(indexKey(lo)); k != nil && binary.BigEndian.Uint64(k) <= hi; k, _ = c.Next() {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	})
}

// Set stores a stable value.
func (s *Store) Set(key, val []byte) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketStable).Put(key, val)
	})
}

// Get returns a stable value; a missing key gives an empty value and no error.
func (s *Store) Get(key []byte) ([]byte, error) {
	var val []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		// Copy: bbolt's slice is valid only inside the transaction.
		val = append([]byte{}, tx.Bucket(bucketStable).Get(key)...)
		return nil
	})
	return val, err
}

// ForEachStable calls fn with every stable key and value, in key order.
func (s *Store) ForEachStable(fn func(key, val []byte) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketStable).ForEach(func(k, v []byte) error {
			return fn(append([]byte{}, k...), append([]byte{}, v...))
		})
	})
}

// SetUint64 stores a stable integer.
func (s *Store) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 returns a stable integer; a missing key gives 0 and no error.
func (s *Store) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	switch {
	case err != nil:
		return 0, err
	case len(v) == 0:
		return 0, nil
	case len(v) != 8:
		return 0, fmt.Errorf("%w: stable key %q holds %d bytes, not a uint64", ErrCorrupt, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

func indexKey(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, i) }

// EncodeLog encodes l in the package doc's format (without its index); the
// controller's vfs store (package raftstore) frames its entries the same way.
func EncodeLog(l *raft.Log) []byte {
	b := make([]byte, 4, headerLen+len(l.Data)+len(l.Extensions)+2*binary.MaxVarintLen64)
	b = append(b, logVersion, byte(l.Type))
	b = binary.BigEndian.AppendUint64(b, l.Term)
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	b = binary.BigEndian.AppendUint64(b, uint64(at))
	b = binary.AppendUvarint(b, uint64(len(l.Data)))
	b = append(b, l.Data...)
	b = binary.AppendUvarint(b, uint64(len(l.Extensions)))
	b = append(b, l.Extensions...)
	binary.BigEndian.PutUint32(b, crc32.Checksum(b[4:], castagnoli))
	return b
}

// DecodeLog parses v, an encoded raft.Log (the package doc's format), into l,
// copying the byte fields out of v.
func DecodeLog(v []byte, l *raft.Log) error {
	if len(v) < headerLen {
		return fmt.Errorf("%w: %d bytes", ErrCorrupt, len(v))
	}
	if crc32.Checksum(v[4:], castagnoli) != binary.BigEndian.Uint32(v) {
		return fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	if v[4] != logVersion {
		return fmt.Errorf("%w: version %d", ErrCorrupt, v[4])
	}
	l.Type = raft.LogType(v[5])
	l.Term = binary.BigEndian.Uint64(v[6:])
	l.AppendedAt = time.Time{}
	if at := int64(binary.BigEndian.Uint64(v[14:])); at != 0 {
		l.AppendedAt = time.Unix(0, at)
	}
	rest := v[headerLen:]
	var ok bool
	if l.Data, rest, ok = takeBytes(rest); !ok {
		return fmt.Errorf("%w: data length", ErrCorrupt)
	}
	if l.Extensions, rest, ok = takeBytes(rest); !ok {
		return fmt.Errorf("%w: extensions length", ErrCorrupt)
	}
	if len(rest) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(rest))
	}
	return nil
}

// takeBytes reads a uvarint length and that many bytes (copied; nil if empty).
func takeBytes(b []byte) (field, rest []byte, ok bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, false
	}
	b = b[k:]
	if n > 0 {
		field = append([]byte(nil), b[:n]...)
	}
	return field, b[n:], true
}
