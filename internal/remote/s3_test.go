package remote_test

import (
	"context"
	"errors"
	"net"
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
