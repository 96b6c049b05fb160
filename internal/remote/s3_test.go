package remote_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/strata-stream/strata/internal/remote"
	"github.com/strata-stream/strata/internal/remote/remotetest"
)

// s3Server starts an S3-compatible server (moto's, installed from PyPI by
// scripts/install-s3.sh) on a free loopback port for the test and returns its
// host:port. Outside CI the test is skipped when the server is not installed;
// in CI (CI=true) that is a failure.
func s3Server(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("moto_server not installed: scripts/install-s3.sh installs it")
		}
		t.Skip("moto_server not installed (bash scripts/install-s3.sh)")
	}
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
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("S3 server on %s not up after 60s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var buckets atomic.Int64

// newBucket creates a fresh bucket on the server and returns an s3:// URL for it.
func newBucket(t *testing.T, addr string) string {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	cl, err := minio.New(addr, &minio.Options{Creds: credentials.NewStaticV4("test", "test", ""), Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	bucket := fmt.Sprintf("strata-test-%d", buckets.Add(1))
	if err := cl.MakeBucket(context.Background(), bucket, minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		t.Fatal(err)
	}
	return "s3://" + bucket + "/cluster-a?endpoint=" + url.QueryEscape(addr) + "&region=us-east-1&insecure=true"
}

func TestS3Conformance(t *testing.T) {
	addr := s3Server(t)
	remotetest.Run(t, func(t *testing.T) remote.Store {
		s, err := remote.Open(newBucket(t, addr), nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// An unreachable endpoint is ErrUnavailable (retriable), never NotFound.
func TestS3Unavailable(t *testing.T) {
	addr := s3Server(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
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
	live, err := remote.Open(newBucket(t, addr), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := live.Get(ctx, "k", 0, -1); !errors.Is(err, remote.ErrNotFound) {
		t.Errorf("get of a missing object: %v, want ErrNotFound", err)
	}
}
