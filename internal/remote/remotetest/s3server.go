package remotetest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/strata-stream/strata/internal/wait"
)

// S3Server is an S3-compatible server (moto's, installed from PyPI by
// scripts/install-s3.sh) running for one test on a loopback port.
type S3Server struct {
	Addr string // host:port
	cmd  *exec.Cmd
}

// StartS3Server starts the server and sets AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY for the test (and the processes it starts). Outside CI
// the test is skipped when the server is not installed; in CI (CI=true) that
// fails it.
func StartS3Server(t testing.TB) *S3Server {
	t.Helper()
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("moto_server not installed: scripts/install-s3.sh installs it")
		}
		t.Skip("moto_server not installed (bash scripts/install-s3.sh)")
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	ln.Close()
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", port)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &S3Server{Addr: addr, cmd: cmd}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	})
	up := wait.Until(time.Now().Add(60*time.Second), func() bool {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	})
	if !up {
		t.Fatalf("S3 server on %s not up after 60s", addr)
	}
	return s
}

var buckets atomic.Int64

// NewBucket creates a fresh bucket and returns an s3:// URL (with a prefix) for
// it, as --remote-storage takes it.
func (s *S3Server) NewBucket(t testing.TB) string {
	t.Helper()
	cl, err := minio.New(s.Addr, &minio.Options{Creds: credentials.NewStaticV4("test", "test", ""), Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	bucket := fmt.Sprintf("strata-test-%d", buckets.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		t.Fatal(err)
	}
	return "s3://" + bucket + "/cluster-a?endpoint=" + url.QueryEscape(s.Addr) + "&region=us-east-1&insecure=true"
}

// Pause stops the server's process (SIGSTOP): requests hang, as with a store that
// is unreachable or very slow. Resume lets it go on with everything it held.
func (s *S3Server) Pause(t testing.TB) {
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
}

// Resume continues a paused server (SIGCONT).
func (s *S3Server) Resume(t testing.TB) {
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}
