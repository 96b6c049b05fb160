package batch

import (
	"bytes"
	"errors"
	"testing"
)

// TestCompressionLevels: Kafka's levels reach the codec (a level of more
// effort gives another, here smaller, output), and every level's output
// decompresses to the input.
func TestCompressionLevels(t *testing.T) {
	in := textLike(1)
	for _, tc := range []struct {
		codec      Codec
		fast, best int
	}{
		{CodecGzip, 1, 9},
		{CodecLZ4, 9, 17}, // 9, Kafka's default, is lz4's fast compressor
		{CodecZstd, 1, 19},
	} {
		var sizes []int
		for _, level := range []int{tc.fast, DefaultLevel(tc.codec), tc.best} {
			out, err := Compress(new(bytes.Buffer), in, Compression{Codec: tc.codec, Level: level})
			if err != nil {
				t.Fatalf("codec %d level %d: %v", tc.codec, level, err)
			}
			back, err := new(RecordsBuffer).inflate(tc.codec, out, len(in))
			if err != nil || !bytes.Equal(back, in) {
				t.Fatalf("codec %d level %d: does not round-trip: %v", tc.codec, level, err)
			}
			sizes = append(sizes, len(out))
		}
		if sizes[2] >= sizes[0] {
			t.Errorf("codec %d: level %d gave %d bytes, level %d %d: the level changes nothing", tc.codec, tc.best, sizes[2], tc.fast, sizes[0])
		}
	}
}

// TestRecompress: a rebuilt batch keeps its header's producer fields and
// timestamps, takes the new codec and renumbers records whose offset
// deltas have gaps (as Kafka assigns offsets of its own then).
func TestRecompress(t *testing.T) {
	recs := []Record{
		{Key: []byte("a"), Value: []byte("1"), OffsetDelta: 0},
		{Key: []byte("b"), Value: nil, TimestampDelta: 5, OffsetDelta: 3},
		{Key: nil, Value: []byte("3"), TimestampDelta: 2, OffsetDelta: 200},
	}
	b, err := Build(BuildOptions{FirstTimestamp: 1000, Idempotent: true, ProducerID: 4, ProducerEpoch: 1, BaseSequence: 10,
		Transactional: true, KeepOffsetDeltas: true, LastOffsetDelta: 2}, recs)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, codec := range []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		out, err := Recompress(b, h, b[HeaderSize:], Compression{Codec: codec, Level: DefaultLevel(codec)})
		if err != nil {
			t.Fatalf("codec %d: %v", codec, err)
		}
		oh, err := Validate(out)
		if err != nil {
			t.Fatalf("codec %d: rebuilt batch invalid: %v", codec, err)
		}
		if oh.Codec() != codec || oh.ProducerID != 4 || oh.ProducerEpoch != 1 || oh.BaseSequence != 10 || !oh.Transactional() ||
			oh.FirstTimestamp != 1000 || oh.MaxTimestamp != 1005 || oh.NumRecords != 3 || oh.LastOffsetDelta != 2 {
			t.Fatalf("codec %d: header %+v", codec, oh)
		}
		i := int32(0)
		err = Records(out, func(_ Header, r Record) error {
			want := recs[i]
			if r.OffsetDelta != i || r.TimestampDelta != want.TimestampDelta || !bytes.Equal(r.Key, want.Key) ||
				!bytes.Equal(r.Value, want.Value) || (r.Value == nil) != (want.Value == nil) || (r.Key == nil) != (want.Key == nil) {
				t.Errorf("codec %d: record %d = %+v, want %+v at offset delta %d", codec, i, r, want, i)
			}
			i++
			return nil
		})
		if err != nil || i != 3 {
			t.Fatalf("codec %d: %d records read, %v", codec, i, err)
		}
	}
}

// TestZstdLevelZeroIsDefault: compression.zstd.level=0 is zstd's default level
// (3), as Kafka's zstd-jni reads it (ZSTD_c_compressionLevel 0 is
// ZSTD_CLEVEL_DEFAULT), not the fastest level.
func TestZstdLevelZeroIsDefault(t *testing.T) {
	in := textLike(7)
	zero, err := Compress(new(bytes.Buffer), in, Compression{Codec: CodecZstd, Level: 0})
	if err != nil {
		t.Fatal(err)
	}
	def, err := Compress(new(bytes.Buffer), in, Compression{Codec: CodecZstd, Level: DefaultLevel(CodecZstd)})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(zero, def) {
		t.Fatalf("zstd level 0 gave %d bytes, the default level %d: level 0 is not the default", len(zero), len(def))
	}
}

// TestRecompressKeepsReadable: records of more than MinDecompressedLimit
// that a codec squeezes past MaxDecompressionRatio are refused
// (ErrDecompressedTooLarge) rather than stored as a batch no reader could
// read back; the same records less compressible are rebuilt.
func TestRecompressKeepsReadable(t *testing.T) {
	value := make([]byte, MinDecompressedLimit+1<<20) // zeros: thousands to one
	b, err := Build(BuildOptions{}, []Record{{Value: value}})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := ParseHeader(b)
	if _, err := Recompress(b, h, b[HeaderSize:], Compression{Codec: CodecZstd, Level: 3}); !errors.Is(err, ErrDecompressedTooLarge) {
		t.Fatalf("65 MiB of zeros rebuilt with zstd: %v, want %v", err, ErrDecompressedTooLarge)
	}
	x := uint32(7)
	for i := range value {
		x = x*1664525 + 1013904223
		value[i] = byte(x >> 24)
	}
	b, err = Build(BuildOptions{}, []Record{{Value: value}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := Recompress(b, h, b[HeaderSize:], Compression{Codec: CodecZstd, Level: 3})
	if err != nil {
		t.Fatalf("65 MiB of noise rebuilt with zstd: %v", err)
	}
	buf := GetRecordsBuffer()
	defer buf.Release()
	oh, _ := ParseHeader(out)
	if _, err := buf.Section(oh, out); err != nil {
		t.Fatalf("the rebuilt batch does not read back: %v", err)
	}
}

// textLike is 20,000 words of a small vocabulary in a pseudo-random order
// drawn from seed: repeats at every distance, as in text, where the codecs'
// levels differ.
func textLike(seed uint32) []byte {
	words := bytes.Fields([]byte("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon"))
	var in []byte
	x := seed
	for range 20000 {
		x = x*1664525 + 1013904223
		in = append(append(in, words[x>>16%uint32(len(words))]...), ' ')
	}
	return in
}

// TestLZ4FrameAsKafkaWritesIt: lz4 records are framed as Kafka's own
// Lz4BlockOutputStream frames them (version 1, independent blocks of at most
// 64 KiB, no block or content checksum), at every level, and read back. Only
// the default level, 9, is the fast compressor (level 1 fell back to it once,
// its option refused by the library).
func TestLZ4FrameAsKafkaWritesIt(t *testing.T) {
	in := bytes.Repeat(textLike(3), 3) // several blocks
	frames := map[int][]byte{}
	for level := 1; level <= 17; level++ {
		dst := new(bytes.Buffer)
		dst.WriteString("kept") // Compress appends
		out, err := Compress(dst, in, Compression{Codec: CodecLZ4, Level: level})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(out, []byte("kept")) {
			t.Fatalf("level %d: the buffer's earlier bytes were not kept", level)
		}
		frame := out[len("kept"):]
		const magic, flg, bd = "\x04\x22\x4d\x18", 0x60, 0x40
		if string(frame[:4]) != magic || frame[4] != flg || frame[5] != bd {
			t.Fatalf("level %d: frame starts % x, want magic % x, FLG %#x, BD %#x", level, frame[:6], magic, flg, bd)
		}
		back, err := new(RecordsBuffer).inflate(CodecLZ4, frame, len(in))
		if err != nil || !bytes.Equal(back, in) {
			t.Fatalf("level %d: does not round-trip: %v", level, err)
		}
		frames[level] = bytes.Clone(frame)
	}
	for _, level := range []int{1, 2, 8, 10, 17} {
		if bytes.Equal(frames[level], frames[DefaultLevel(CodecLZ4)]) {
			t.Errorf("level %d compressed as the fast compressor does", level)
		}
	}
}

// BenchmarkCompress compresses about 1 MB of text-like records (a full
// default batch) with each codec at Kafka's default level.
func BenchmarkCompress(b *testing.B) {
	var in []byte
	for seed := uint32(1); len(in) < 1<<20; seed++ {
		in = append(in, textLike(seed)...)
	}
	in = in[:1<<20]
	for codec, name := range map[Codec]string{CodecGzip: "gzip", CodecSnappy: "snappy", CodecLZ4: "lz4", CodecZstd: "zstd"} {
		b.Run(name, func(b *testing.B) {
			c := Compression{Codec: codec, Level: DefaultLevel(codec)}
			var dst bytes.Buffer
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				dst.Reset()
				if _, err := Compress(&dst, in, c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
