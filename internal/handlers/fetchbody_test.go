package handlers

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch/batchtest"
)

// bufWriter is a protocol.BodyWriter that copies file ranges into memory.
type bufWriter struct{ bytes.Buffer }

func (w *bufWriter) SendFile(f *os.File, off int64, n int) error {
	_, err := io.Copy(&w.Buffer, io.NewSectionReader(f, off, int64(n)))
	return err
}

// TestEncodeFetchBodyMatchesKmsg proves the spliced body (file ranges and
// in-memory record data) is byte-for-byte what kmsg encodes when the record data
// is inline, for every Fetch version we serve.
func TestEncodeFetchBodyMatchesKmsg(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 300) // 4800 bytes of "records"
	path := filepath.Join(t.TempDir(), "seg.log")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	ranges := []struct{ off, n int }{{0, 100}, {100, 0}, {1000, 3800}, {7, 200}}
	var maxVersion int16
	for _, a := range allApis() {
		if a.key == 1 {
			maxVersion = a.max
		}
	}
	if maxVersion < 16 {
		t.Fatalf("Fetch is served up to v%d", maxVersion)
	}
	for version := int16(4); version <= maxVersion; version++ {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			build := func() *kmsg.FetchResponse {
				resp := kmsg.NewPtrFetchResponse()
				resp.Version = version
				for ti := 0; ti < 2; ti++ {
					topic := kmsg.NewFetchResponseTopic()
					topic.Topic = fmt.Sprintf("topic-%d", ti)
					topic.TopicID[0] = byte(ti + 1)
					for pi := 0; pi < 3; pi++ {
						p := kmsg.NewFetchResponseTopicPartition()
						p.Partition = int32(pi)
						p.HighWatermark = int64(1000 * pi)
						p.LastStableOffset = p.HighWatermark
						if pi == 2 {
							p.CurrentLeader.LeaderID = 1 // a tagged field after the records
							p.CurrentLeader.LeaderEpoch = 3
						}
						topic.Partitions = append(topic.Partitions, p)
					}
					resp.Topics = append(resp.Topics, topic)
				}
				return resp
			}
			inline := build()
			spliced := build()
			files := map[*kmsg.FetchResponseTopicPartition]*fileRecords{}
			released := 0
			i := 0
			for ti := range spliced.Topics {
				for pi := range spliced.Topics[ti].Partitions {
					if ti == 1 && pi == 1 {
						// An error partition with no records stays inline.
						inline.Topics[ti].Partitions[pi].ErrorCode = 1
						spliced.Topics[ti].Partitions[pi].ErrorCode = 1
						continue
					}
					r := ranges[i%len(ranges)]
					i++
					inline.Topics[ti].Partitions[pi].RecordBatches = data[r.off : r.off+r.n]
					fr := &fileRecords{file: f, off: int64(r.off), n: r.n, release: func() { released++ }}
					if i%3 == 0 { // bytes in memory (a remote block), written as they are
						fr.file, fr.off, fr.data = nil, 0, data[r.off:r.off+r.n]
					}
					files[&spliced.Topics[ti].Partitions[pi]] = fr
				}
			}
			want := inline.AppendTo(nil)
			body, err := encodeFetchBody(spliced, files)
			if err != nil {
				t.Fatal(err)
			}
			var w bufWriter
			if err := body.WriteBody(&w); err != nil {
				t.Fatal(err)
			}
			if body.Len() != len(want) {
				t.Fatalf("Len() = %d, want %d", body.Len(), len(want))
			}
			if !bytes.Equal(w.Bytes(), want) {
				t.Fatalf("spliced body differs from kmsg's encoding")
			}
			body.Release()
			if released != len(files) {
				t.Fatalf("released %d file ranges, want %d", released, len(files))
			}
		})
	}
}

// countRecords reads the record counts from batch headers and stops at a
// partial batch (a fetch may end mid-batch only in a malformed answer).
func TestCountRecords(t *testing.T) {
	a := batchtest.Build(batchtest.Options{Records: batchtest.Values(3, 10)})
	b := batchtest.Build(batchtest.Options{Records: batchtest.Values(5, 100)})
	both := append(append([]byte(nil), a...), b...)
	for _, tc := range []struct {
		name string
		in   []byte
		want int64
	}{
		{"none", nil, 0},
		{"one", a, 3},
		{"two", both, 8},
		{"partial second", both[:len(both)-1], 3},
		{"header only", both[:len(a)+20], 3},
	} {
		if got := countRecords(tc.in); got != tc.want {
			t.Errorf("%s: %d records, want %d", tc.name, got, tc.want)
		}
	}
}
