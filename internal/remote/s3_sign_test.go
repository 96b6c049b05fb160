package remote

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// How a PUT's payload is signed: over https the headers only (UNSIGNED-PAYLOAD,
// the body sent as it is), over http every chunk (SigV4 streaming, aws-chunked):
// what docs/storage.md says of S3 PUTs. The server is a stub that
// records each request.
func TestS3PayloadSigning(t *testing.T) {
	for _, tc := range []struct {
		tls      bool
		sha, enc string
	}{
		{true, "UNSIGNED-PAYLOAD", ""},
		{false, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", "aws-chunked"},
	} {
		var mu sync.Mutex
		var sha, enc []string
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			mu.Lock()
			sha, enc = append(sha, r.Header.Get("X-Amz-Content-Sha256")), append(enc, r.Header.Get("Content-Encoding"))
			mu.Unlock()
			w.Header().Set("ETag", `"x"`)
		})
		srv := httptest.NewUnstartedServer(h)
		if tc.tls {
			srv.StartTLS()
		} else {
			srv.Start()
		}
		defer srv.Close()
		host := srv.Listener.Addr().String()
		cl, err := minio.New(host, &minio.Options{Creds: credentials.NewStaticV4("a", "b", ""), Secure: tc.tls,
			Region: "us-east-1", Transport: srv.Client().Transport})
		if err != nil {
			t.Fatal(err)
		}
		s := &S3{client: cl, bucket: "bucket"}
		data := bytes.Repeat([]byte("x"), 1<<20)
		body := &struct{ io.Reader }{bytes.NewReader(data)}
		if err := s.Put(context.Background(), "k", body, int64(len(data))); err != nil {
			t.Fatalf("tls %v: %v", tc.tls, err)
		}
		mu.Lock()
		if len(sha) != 1 || sha[0] != tc.sha || enc[0] != tc.enc {
			t.Errorf("tls %v: requests signed %q, encoded %q; want one, %q and %q", tc.tls, sha, enc, tc.sha, tc.enc)
		}
		mu.Unlock()
	}
}
