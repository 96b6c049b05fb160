package main

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestStartupToFirstProduce execs a fresh single node (the real main()) and
// measures the time until it has answered Metadata and acknowledged an acks=all
// produce to an auto-created topic. docs/benchmarks.md records the figure on a
// quiet machine (about 100 ms); the bound here is generous, for the race detector
// on two busy cores, yet well below the Raft election wait (1-2 s) this used to
// include.
func TestStartupToFirstProduce(t *testing.T) {
	kafka, ctrl, http := closedAddr(t), closedAddr(t), closedAddr(t)
	cmd := exec.Command(os.Args[0], "server", "--data-dir", t.TempDir(),
		"--kafka-addr", kafka, "--controller-addr", ctrl, "--http-addr", http)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}()

	cl, err := kgo.NewClient(kgo.SeedBrokers(kafka), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RetryBackoffFn(func(int) time.Duration { return 2 * time.Millisecond }),
		kgo.MetadataMinAge(10*time.Millisecond), kgo.ProducerLinger(0), kgo.UnknownTopicRetries(-1), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "startup", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("first produce: %v", err)
	}
	took := time.Since(start)
	t.Logf("exec to first acks=all produce: %v", took)
	if took > 2*time.Second {
		t.Errorf("exec to first acks=all produce took %v, want < 2s", took)
	}
	select {
	case err := <-exited:
		t.Fatalf("the server exited: %v", err)
	default:
	}
}
