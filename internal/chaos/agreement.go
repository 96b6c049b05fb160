package chaos

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/chaos/history"
	"github.com/strata-stream/strata/internal/storage"
	"github.com/strata-stream/strata/internal/vfs"
)

// ReplicaDivergence is the anomaly class of replicas that disagree below the
// high-water mark, or that disagree with what the final read returned.
const ReplicaDivergence = "replica-divergence"

// replicaLog is one replica's copy of a partition below an offset: its batches'
// bytes as stored, and the records they hold.
type replicaLog struct {
	bytes   []byte
	records []history.Record
}

// readReplica opens the partition log in dir (a stopped node's, or a copy) and
// reads every batch below end.
func readReplica(fsys vfs.FS, dir string, end int64) (replicaLog, error) {
	l, err := storage.Open(fsys, dir, storage.Config{})
	if err != nil {
		return replicaLog{}, fmt.Errorf("opening %s: %w", dir, err)
	}
	defer l.Close()
	if leo := l.LogEndOffset(); leo < end {
		return replicaLog{}, fmt.Errorf("%s ends at %d, below the high-water mark %d", dir, leo, end)
	}
	var out replicaLog
	for off := l.LogStartOffset(); off < end; {
		chunk, err := l.Read(off, 1<<20, end)
		if err != nil {
			return replicaLog{}, fmt.Errorf("reading %s at %d: %w", dir, off, err)
		}
		b, err := chunk.Bytes()
		chunk.Release()
		if err != nil {
			return replicaLog{}, fmt.Errorf("reading %s at %d: %w", dir, off, err)
		}
		if len(b) == 0 {
			break // the rest is one batch straddling end
		}
		out.bytes = append(out.bytes, b...)
		it := batch.NewStoredIter(b)
		for it.Next() {
			h := it.Header()
			err := batch.Records(it.Batch(), func(_ batch.Header, r batch.Record) error {
				out.records = append(out.records, history.Record{Offset: h.BaseOffset + int64(r.OffsetDelta), Key: string(r.Key), Value: string(r.Value)})
				return nil
			})
			if err != nil {
				return replicaLog{}, fmt.Errorf("%s: batch at %d: %w", dir, h.BaseOffset, err)
			}
			off = h.NextOffset()
		}
		if err := it.Err(); err != nil {
			return replicaLog{}, fmt.Errorf("%s: a stored batch does not parse: %w", dir, err)
		}
	}
	return out, nil
}

// checkAgreement compares the replicas of one partition, every one read below
// end, with each other byte for byte and with the final read's records, and adds
// what differs to res.
func checkAgreement(res *history.Result, partition int32, final []history.Record, replicas map[int32]replicaLog, readErrs map[int32]error) {
	for _, node := range slices.Sorted(maps.Keys(readErrs)) {
		err := readErrs[node]
		res.Add(ReplicaDivergence, "partition %d, node %d: %v", partition, node, err)
	}
	var first int32 = -1
	for _, node := range slices.Sorted(maps.Keys(replicas)) {
		r := replicas[node]
		if first < 0 {
			first = node
			continue
		}
		if want := replicas[first]; !bytes.Equal(r.bytes, want.bytes) {
			res.Add(ReplicaDivergence, "partition %d: node %d holds %d bytes below the high-water mark, node %d %d bytes, and they differ",
				partition, node, len(r.bytes), first, len(want.bytes))
		}
	}
	if first < 0 {
		return
	}
	got := replicas[first].records
	for i := 0; i < max(len(got), len(final)); i++ {
		if i >= len(got) || i >= len(final) || got[i] != final[i] {
			var g, f any = "nothing", "nothing"
			if i < len(got) {
				g = got[i]
			}
			if i < len(final) {
				f = final[i]
			}
			res.Add(ReplicaDivergence, "partition %d: record %d of node %d's log is %v, the final read returned %v", partition, i, first, g, f)
			return
		}
	}
}

// copyDir copies the directory tree at src to dst, so a stopped node's log can be
// opened (and recovered) without touching the original.
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(to)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}
