package remote_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-stream/strata/internal/remote"
	"github.com/strata-stream/strata/internal/remote/remotetest"
)

func TestS3Conformance(t *testing.T) {
	srv := remotetest.StartS3Server(t)
	remotetest.Run(t, func(t *testing.T) remote.Store {
		s, err := remote.Open(srv.NewBucket(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// An unreachable endpoint is ErrUnavailable (retriable), never NotFound.
func TestS3Unavailable(t *testing.T) {
	srv := remotetest.StartS3Server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	s, err := remote.Open("s3://b/p?endpoint="+dead+"&region=us-east-1&insecure=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "k", 0, -1); !errors.Is(err, remote.ErrUnavailable) {
		t.Errorf("get: %v, want ErrUnavailable", err)
	}
	if err := s.Put(ctx, "k", strings.NewReader("x"), 1); !errors.Is(err, remote.ErrUnavailable) {
		t.Errorf("put: %v, want ErrUnavailable", err)
	}
	// The live server still answers: a missing object there is ErrNotFound.
	live, err := remote.Open(srv.NewBucket(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := live.Get(ctx, "k", 0, -1); !errors.Is(err, remote.ErrNotFound) {
		t.Errorf("get of a missing object: %v, want ErrNotFound", err)
	}
}

// A file section above minio-go's 16 MiB part size goes up as a multipart
// upload, its parts read from the file in parallel, and reads back whole; so
// does a segment object made of a file section and bytes.
func TestS3PutLargeFileSection(t *testing.T) {
	s, ctx := s3Store(t)
	data := pattern(40<<20 + 100)
	f, err := os.Create(filepath.Join(t.TempDir(), "segment"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	want := data[100:]
	if err := s.Put(ctx, "t/0/big", io.NewSectionReader(f, 100, int64(len(want))), int64(len(want))); err != nil {
		t.Fatalf("put: %v", err)
	}
	got, err := s.Get(ctx, "t/0/big", 0, -1)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("get: %d bytes (equal %v), %v; want %d bytes", len(got), bytes.Equal(got, want), err, len(want))
	}
	// A segment object: the file section, then an index, as one Concat; the
	// multipart upload's parts straddle the two.
	tail := []byte("block index")
	body := remote.Concat(io.NewSectionReader(f, 100, int64(len(want))), io.NewSectionReader(bytes.NewReader(tail), 0, int64(len(tail))))
	if err := s.Put(ctx, "t/0/big.seg", body, body.Size()); err != nil {
		t.Fatalf("put of a Concat: %v", err)
	}
	got, err = s.Get(ctx, "t/0/big.seg", 0, -1)
	if want := append(bytes.Clone(want), tail...); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("get of a Concat: %d bytes (equal %v), %v; want %d bytes", len(got), bytes.Equal(got, want), err, len(want))
	}
}

// onlyReader hides every method of a reader but Read, counting the bytes read:
// a stream, as the tier's segment body is.
type onlyReader struct {
	r io.Reader
	n int64
}

func (o *onlyReader) Read(p []byte) (int, error) {
	n, err := o.r.Read(p)
	o.n += int64(n)
	return n, err
}

// A stream is read once, in order, whatever its size: one request up to the
// part size, a multipart upload of parts sent while the next fills above it;
// a stream that ends early stores nothing.
func TestS3PutStream(t *testing.T) {
	s, ctx := s3Store(t)
	for _, size := range []int{1 << 20, 16 << 20, 40<<20 + 100} {
		data := pattern(size)
		key := fmt.Sprintf("t/0/stream-%d", size)
		body := &onlyReader{r: bytes.NewReader(data)}
		if err := s.Put(ctx, key, body, int64(size)); err != nil {
			t.Fatalf("put of %d bytes: %v", size, err)
		}
		if body.n != int64(size) {
			t.Errorf("put of %d bytes read %d from the stream, want each byte once", size, body.n)
		}
		got, err := s.Get(ctx, key, 0, -1)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("get: %d bytes (equal %v), %v; want %d bytes", len(got), bytes.Equal(got, data), err, size)
		}
		short := &onlyReader{r: bytes.NewReader(data[:size-1])}
		if err := s.Put(ctx, key+"-short", short, int64(size)); !errors.Is(err, remote.ErrUnavailable) {
			t.Fatalf("put of a stream one byte short: %v, want ErrUnavailable", err)
		}
		if _, err := s.Get(ctx, key+"-short", 0, -1); !errors.Is(err, remote.ErrNotFound) {
			t.Fatalf("get after a short put: %v, want ErrNotFound", err)
		}
	}
}

// s3Store starts an S3 server for the test and opens a store in a fresh
// bucket, with a context good for two minutes.
func s3Store(t *testing.T) (remote.Store, context.Context) {
	s, err := remote.Open(remotetest.StartS3Server(t).NewBucket(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return s, ctx
}

// pattern is n bytes that repeat only every 5 x 256.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7 / 5)
	}
	return b
}
