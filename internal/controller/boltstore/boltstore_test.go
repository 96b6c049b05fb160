package boltstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

func openTemp(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "raft.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

func entry(i uint64) *raft.Log {
	return &raft.Log{
		Index: i, Term: i/3 + 1, Type: raft.LogCommand,
		Data: []byte{byte(i), 'x'}, Extensions: []byte("ext"),
		AppendedAt: time.Unix(1700000000, int64(i)),
	}
}

func wantLog(t *testing.T, s *Store, want *raft.Log) {
	t.Helper()
	var got raft.Log
	if err := s.GetLog(want.Index, &got); err != nil {
		t.Fatalf("GetLog(%d): %v", want.Index, err)
	}
	if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type ||
		!bytes.Equal(got.Data, want.Data) || !bytes.Equal(got.Extensions, want.Extensions) ||
		!got.AppendedAt.Equal(want.AppendedAt) {
		t.Fatalf("GetLog(%d) = %+v, want %+v", want.Index, got, want)
	}
}

func wantRange(t *testing.T, s *Store, first, last uint64) {
	t.Helper()
	f, err1 := s.FirstIndex()
	l, err2 := s.LastIndex()
	if err1 != nil || err2 != nil || f != first || l != last {
		t.Fatalf("range = [%d, %d] (%v, %v), want [%d, %d]", f, l, err1, err2, first, last)
	}
}

func TestLogStore(t *testing.T) {
	s, path := openTemp(t)
	wantRange(t, s, 0, 0)
	var l raft.Log
	if err := s.GetLog(1, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog on empty store = %v", err)
	}
	if err := s.StoreLog(entry(1)); err != nil {
		t.Fatal(err)
	}
	var batch []*raft.Log
	for i := uint64(2); i <= 300; i++ {
		batch = append(batch, entry(i))
	}
	batch = append(batch, &raft.Log{Index: 301, Term: 9, Type: raft.LogNoop}) // no data, no time
	if err := s.StoreLogs(batch); err != nil {
		t.Fatal(err)
	}
	wantRange(t, s, 1, 301)
	for _, i := range []uint64{1, 2, 255, 256, 300} {
		wantLog(t, s, entry(i))
	}
	wantLog(t, s, &raft.Log{Index: 301, Term: 9, Type: raft.LogNoop})

	// Raft deletes a prefix after a snapshot and a suffix on conflicts.
	if err := s.DeleteRange(1, 100); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(251, 400); err != nil {
		t.Fatal(err)
	}
	wantRange(t, s, 101, 250)
	if err := s.GetLog(100, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("deleted entry: %v", err)
	}

	// Everything survives a reopen.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	wantRange(t, s2, 101, 250)
	wantLog(t, s2, entry(200))
}

func TestStableStore(t *testing.T) {
	s, path := openTemp(t)
	if v, err := s.Get([]byte("missing")); err != nil || len(v) != 0 {
		t.Fatalf("Get(missing) = %q, %v", v, err)
	}
	if v, err := s.GetUint64([]byte("missing")); err != nil || v != 0 {
		t.Fatalf("GetUint64(missing) = %d, %v", v, err)
	}
	if err := s.Set([]byte("k"), []byte("value")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("term"), 1<<40+7); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetUint64([]byte("k")); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("GetUint64 of a 5-byte value = %v, want ErrCorrupt", err)
	}
	_ = s.Close()
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if v, err := s2.Get([]byte("k")); err != nil || string(v) != "value" {
		t.Fatalf("Get(k) after reopen = %q, %v", v, err)
	}
	if v, err := s2.GetUint64([]byte("term")); err != nil || v != 1<<40+7 {
		t.Fatalf("GetUint64(term) after reopen = %d, %v", v, err)
	}
}

// TestCorruptEntry damages stored values behind the store's back.
func TestCorruptEntry(t *testing.T) {
	good := EncodeLog(entry(5))
	tests := []struct {
		name  string
		value []byte
	}{
		{"short", good[:10]},
		{"flipped data bit", func() []byte { b := bytes.Clone(good); b[len(b)-5] ^= 0x10; return b }()},
		{"flipped crc bit", func() []byte { b := bytes.Clone(good); b[0] ^= 1; return b }()},
		{"trailing byte", withCRC(append(bytes.Clone(good), 0))},
		{"data length too long", withCRC(func() []byte { b := bytes.Clone(good); b[headerLen] = 0x7f; return b }())},
		{"unknown version", withCRC(func() []byte { b := bytes.Clone(good); b[4] = 9; return b }())},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := openTemp(t)
			err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketLogs).Put(indexKey(5), tt.value) })
			if err != nil {
				t.Fatal(err)
			}
			var l raft.Log
			if err := s.GetLog(5, &l); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("GetLog = %v, want ErrCorrupt", err)
			}
		})
	}
}

// withCRC recomputes the checksum of an encoded entry, so the damage is found
// by the parser rather than the checksum.
func withCRC(b []byte) []byte {
	binary.BigEndian.PutUint32(b, crc32.Checksum(b[4:], castagnoli))
	return b
}

// FuzzDecodeLog checks that no stored value makes the decoder panic.
func FuzzDecodeLog(f *testing.F) {
	f.Add(EncodeLog(entry(1)))
	f.Add(EncodeLog(&raft.Log{}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var l raft.Log
		if err := DecodeLog(b, &l); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error %v does not wrap ErrCorrupt", err)
		}
		// Valid checksums are rare in random input: also parse with one fixed up.
		if len(b) >= headerLen {
			_ = DecodeLog(withCRC(bytes.Clone(b)), &l)
		}
	})
}
