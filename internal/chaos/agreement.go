package chaos

import (
	"bytes"
	"cmp"
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

// replicaLog is one replica's copy of a partition from its local log start up
// to an offset: its batches' bytes as stored, and the records they hold.
type replicaLog struct {
	start   int64 // the local log start (above 0 once a tiered log deleted locally)
	batches []storedBatch
	records []history.Record
}

// storedBatch is one batch as a replica stores it.
type storedBatch struct {
	base  int64
	bytes []byte
}

// from returns the bytes and records of the batches at or after offset.
func (l replicaLog) from(offset int64) ([]byte, []history.Record) {
	var b []byte
	for _, sb := range l.batches {
		if sb.base >= offset {
			b = append(b, sb.bytes...)
		}
	}
	i, _ := slices.BinarySearchFunc(l.records, offset, func(r history.Record, o int64) int { return cmp.Compare(r.Offset, o) })
	return b, l.records[i:]
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
	out := replicaLog{start: l.LogStartOffset()}
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
		it := batch.NewStoredIter(b)
		for it.Next() {
			h := it.Header()
			out.batches = append(out.batches, storedBatch{h.BaseOffset, slices.Clone(it.Batch())})
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
// what differs to res. A tiered log keeps only its tail locally, and each
// replica deletes on its own: they are compared from the highest local start.
// committedOnly: final is a read_committed read of values, which leaves out
// aborted records and markers; every one of its values must be in the replicas
// at its offset, not the same sequence.
func checkAgreement(res *history.Result, topic string, partition int32, final []history.Record, replicas map[int32]replicaLog, readErrs map[int32]error, committedOnly bool) {
	for _, node := range slices.Sorted(maps.Keys(readErrs)) {
		err := readErrs[node]
		res.Add(ReplicaDivergence, "%s-%d, node %d: %v", topic, partition, node, err)
	}
	nodes := slices.Sorted(maps.Keys(replicas))
	if len(nodes) == 0 {
		return
	}
	var from int64
	for _, node := range nodes {
		from = max(from, replicas[node].start)
	}
	first := nodes[0]
	want, got := replicas[first].from(from)
	for _, node := range nodes[1:] {
		if b, _ := replicas[node].from(from); !bytes.Equal(b, want) {
			res.Add(ReplicaDivergence, "%s-%d: from offset %d node %d holds %d bytes below the high-water mark, node %d %d bytes, and they differ; %s",
				topic, partition, from, node, len(b), first, len(want), firstDifference(replicas[node], replicas[first], from, node, first))
		}
	}
	i, _ := slices.BinarySearchFunc(final, from, func(r history.Record, o int64) int { return cmp.Compare(r.Offset, o) })
	final = final[i:]
	if committedOnly {
		at := map[int64]history.Record{}
		for _, r := range got {
			at[r.Offset] = r
		}
		for _, f := range final {
			if g, ok := at[f.Offset]; !ok || g.Value != f.Value {
				res.Add(ReplicaDivergence, "%s-%d: the final read returned %q at %d, node %d's log holds %q there", topic, partition, f.Value, f.Offset, first, g.Value)
				return
			}
		}
		return
	}
	for i := 0; i < max(len(got), len(final)); i++ {
		if i >= len(got) || i >= len(final) || got[i] != final[i] {
			var g, f any = "nothing", "nothing"
			if i < len(got) {
				g = got[i]
			}
			if i < len(final) {
				f = final[i]
			}
			res.Add(ReplicaDivergence, "%s-%d: record %d from offset %d of node %d's log is %v, the final read returned %v", topic, partition, i, from, first, g, f)
			return
		}
	}
}

// firstDifference describes the first batch at or after from where replica
// a (node na) and replica b (node nb) differ.
func firstDifference(a, b replicaLog, from int64, na, nb int32) string {
	at := func(l replicaLog) []storedBatch {
		i, _ := slices.BinarySearchFunc(l.batches, from, func(sb storedBatch, o int64) int { return cmp.Compare(sb.base, o) })
		return l.batches[i:]
	}
	as, bs := at(a), at(b)
	for i := 0; i < max(len(as), len(bs)); i++ {
		if i < len(as) && i < len(bs) && as[i].base == bs[i].base && bytes.Equal(as[i].bytes, bs[i].bytes) {
			continue
		}
		return fmt.Sprintf("first: node %d's %s, node %d's %s", na, describeBatch(as, i), nb, describeBatch(bs, i))
	}
	return "no batch differs"
}

// describeBatch names batches[i] by its header, or says there is none.
func describeBatch(batches []storedBatch, i int) string {
	if i >= len(batches) {
		return "log ends there"
	}
	sb := batches[i]
	h, err := batch.ParseHeader(sb.bytes)
	if err != nil {
		return fmt.Sprintf("batch at %d (%d bytes)", sb.base, len(sb.bytes))
	}
	return fmt.Sprintf("batch at %d (%d bytes, leader epoch %d, producer %d epoch %d sequence %d, %d records, control %v)",
		sb.base, len(sb.bytes), h.PartitionLeaderEpoch, h.ProducerID, h.ProducerEpoch, h.BaseSequence, h.NumRecords, h.Control())
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
