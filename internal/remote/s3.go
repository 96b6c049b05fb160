package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3 is a Store in a bucket of an S3-compatible object store (AWS, MinIO, Ceph,
// R2, GCS interop), through minio-go. Objects are named prefix + key.
type S3 struct {
	client *minio.Client
	bucket string
	prefix string // "" or ending in "/"
}

// NewS3 opens s3://bucket/prefix?endpoint=host:port&region=r&insecure=true.
// The endpoint defaults to AWS (s3.amazonaws.com); insecure=true speaks plain
// HTTP. Credentials come from the standard AWS chain: AWS_ACCESS_KEY_ID /
// AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), the shared credentials file
// (AWS_PROFILE), then the instance or task role.
func NewS3(u *url.URL) (*S3, error) {
	if u.Host == "" {
		return nil, fmt.Errorf("%w: %q: s3 URLs name a bucket (s3://bucket/prefix)", ErrUnsupportedURL, u.Redacted())
	}
	q := u.Query()
	endpoint := q.Get("endpoint")
	if endpoint == "" {
		endpoint = "s3.amazonaws.com"
	}
	secure := q.Get("insecure") != "true"
	creds := credentials.NewChainCredentials([]credentials.Provider{
		&credentials.EnvAWS{},
		&credentials.FileAWSCredentials{},
		&credentials.IAM{Client: &http.Client{Transport: http.DefaultTransport}},
	})
	client, err := minio.New(endpoint, &minio.Options{Creds: creds, Secure: secure, Region: q.Get("region")})
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrUnsupportedURL, u.Redacted(), err)
	}
	prefix := strings.Trim(u.Path, "/")
	if prefix != "" {
		if err := CheckKey(prefix); err != nil {
			return nil, fmt.Errorf("%w: %q: prefix %v", ErrUnsupportedURL, u.Redacted(), err)
		}
		prefix += "/"
	}
	return &S3{client: client, bucket: u.Host, prefix: prefix}, nil
}

// s3Error maps a minio-go error onto the package's errors.
func s3Error(op, key string, err error) error {
	resp := minio.ToErrorResponse(err)
	switch {
	case resp.Code == "NoSuchKey" || resp.StatusCode == http.StatusNotFound && resp.Code != "NoSuchBucket":
		return fmt.Errorf("%w: %s", ErrNotFound, key)
	case resp.Code == "InvalidRange" || resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		return fmt.Errorf("%w: %s", ErrRange, key)
	}
	return fmt.Errorf("%w: %s %s: %v", ErrUnavailable, op, key, err)
}

// s3UploadThreads is how many parts of a multipart upload go at once;
// s3PartBytes is the part size (minio-go's default, named: a stream's parts
// need it, or minio-go sizes them for a 5 TiB object).
const (
	s3UploadThreads = 4
	s3PartBytes     = 16 << 20
)

// Put uploads the object in one request up to s3PartBytes, in a multipart
// upload above it; S3 makes it visible only once complete. A section of a file
// is given to minio-go as an io.ReaderAt, so that a multipart upload reads and
// sends s3UploadThreads parts at once straight from the file. Any other reader
// is read once, in order (the tier's segment stream cuts its blocks as it is
// read): straight into the request up to s3PartBytes, above it part by part
// into s3UploadThreads buffers of s3PartBytes, each sent while the next fills.
//
// The payload is never read twice for its signature: over https minio-go
// signs the headers only (UNSIGNED-PAYLOAD; TLS protects the bytes), over
// http (insecure=true) it signs each 64 KiB chunk as it sends it (SigV4
// streaming, a SHA-256 pass over the bytes in the same read), the only
// protection the payload has there.
func (s *S3) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if sr, ok := r.(*io.SectionReader); ok {
		return s.putSection(ctx, key, sr, size)
	}
	counted := &countingReader{r: io.LimitReader(r, size)}
	opts := minio.PutObjectOptions{ContentType: "application/octet-stream", PartSize: s3PartBytes,
		NumThreads: s3UploadThreads, ConcurrentStreamParts: true}
	_, err := s.client.PutObject(ctx, s.bucket, s.prefix+key, counted, size, opts)
	if err != nil {
		return s3Error("put", key, err)
	}
	if counted.n != size {
		// The store may have kept a short object: do not let it count.
		_ = s.client.RemoveObject(ctx, s.bucket, s.prefix+key, minio.RemoveObjectOptions{})
		return fmt.Errorf("%w: put %s: reader gave %d of %d bytes", ErrUnavailable, key, counted.n, size)
	}
	return nil
}

// putSection uploads size bytes of sr from its current position.
func (s *S3) putSection(ctx context.Context, key string, sr *io.SectionReader, size int64) error {
	cur, err := sr.Seek(0, io.SeekCurrent)
	if err != nil {
		return fmt.Errorf("%w: put %s: %v", ErrUnavailable, key, err)
	}
	if left := sr.Size() - cur; left < size {
		return fmt.Errorf("%w: put %s: reader gave %d of %d bytes", ErrUnavailable, key, max(left, 0), size)
	}
	outer, base, _ := sr.Outer()
	part := io.NewSectionReader(outer, base+cur, size)
	opts := minio.PutObjectOptions{ContentType: "application/octet-stream", PartSize: s3PartBytes, NumThreads: s3UploadThreads}
	if _, err := s.client.PutObject(ctx, s.bucket, s.prefix+key, part, size, opts); err != nil {
		return s3Error("put", key, err)
	}
	_, err = sr.Seek(cur+size, io.SeekStart)
	return err
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Get reads a byte range with a ranged GET (after a HEAD for the size).
func (s *S3) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	info, err := s.client.StatObject(ctx, s.bucket, s.prefix+key, minio.StatObjectOptions{})
	if err != nil {
		return nil, s3Error("get", key, err)
	}
	size := info.Size
	if off < 0 || off > size || (off == size && n != 0 && size > 0) {
		return nil, fmt.Errorf("%w: %s: offset %d, size %d", ErrRange, key, off, size)
	}
	if n < 0 || off+n > size {
		n = size - off
	}
	if n == 0 {
		return []byte{}, nil
	}
	opts := minio.GetObjectOptions{}
	if err := opts.SetRange(off, off+n-1); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrRange, key, err)
	}
	obj, err := s.client.GetObject(ctx, s.bucket, s.prefix+key, opts)
	if err != nil {
		return nil, s3Error("get", key, err)
	}
	defer obj.Close()
	b := make([]byte, n)
	if _, err := io.ReadFull(obj, b); err != nil {
		return nil, s3Error("get", key, err)
	}
	return b, nil
}

// Delete removes the object; S3 deletes are idempotent.
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := s.client.RemoveObject(ctx, s.bucket, s.prefix+key, minio.RemoveObjectOptions{}); err != nil {
		if errors.Is(s3Error("delete", key, err), ErrNotFound) {
			return nil
		}
		return s3Error("delete", key, err)
	}
	return nil
}

// List pages through the keys under prefix.
func (s *S3) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true}) {
		if obj.Err != nil {
			return nil, s3Error("list", prefix, obj.Err)
		}
		keys = append(keys, strings.TrimPrefix(obj.Key, s.prefix))
	}
	slices.Sort(keys)
	return keys, nil
}

var _ IncompleteRemover = (*S3)(nil)

// RemoveIncomplete aborts the multipart uploads of keys under prefix started
// before before, which frees their parts. minio-go aborts the upload of a Put
// that fails; one cut short by a crash stays, unlisted by ListObjects, and S3
// keeps (and bills) its parts until it is aborted. (A bucket lifecycle rule,
// AbortIncompleteMultipartUpload, does the same on the store's side.)
func (s *S3) RemoveIncomplete(ctx context.Context, prefix string, before time.Time) (int, error) {
	ctx, cancel := context.WithCancel(ctx) // stops the listing if we return early
	defer cancel()
	core := minio.Core{Client: s.client}
	kept := 0
	for up := range s.client.ListIncompleteUploads(ctx, s.bucket, s.prefix+prefix, true) {
		if up.Err != nil {
			return kept, s3Error("list uploads", prefix, up.Err)
		}
		if !before.IsZero() && !up.Initiated.Before(before) {
			kept++
			continue
		}
		key := strings.TrimPrefix(up.Key, s.prefix)
		if err := core.AbortMultipartUpload(ctx, s.bucket, up.Key, up.UploadID); err != nil {
			if err := s3Error("abort upload", key, err); !errors.Is(err, ErrNotFound) {
				return kept, err
			}
		}
	}
	return kept, nil
}
