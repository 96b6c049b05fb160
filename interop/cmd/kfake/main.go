// Command kfake runs franz-go's in-memory fake Kafka broker (kfake) on loopback, so that
// an interop client can be run by hand against a reference broker:
//
//	go run ./interop/cmd/kfake -topics demo,other -partitions 3
//
// It prints the bootstrap address on stdout and serves until SIGINT or SIGTERM. Nothing
// is written to disk. The interop test starts kfake in-process instead of using this.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	port := flag.Int("port", 0, "port on 127.0.0.1 to listen on (0 picks a free one)")
	topics := flag.String("topics", "", "comma-separated topics to create at start (optional)")
	partitions := flag.Int("partitions", 3, "partitions of each of -topics")
	flag.Parse()
	if *partitions <= 0 || *port < 0 || *port > 65535 {
		fmt.Fprintln(os.Stderr, "kfake: -partitions must be positive and -port in [0, 65535]")
		os.Exit(2)
	}

	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(*port)}
	if *topics != "" {
		opts = append(opts, kfake.SeedTopics(int32(*partitions), strings.Split(*topics, ",")...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kfake:", err)
		os.Exit(1)
	}
	defer c.Close()
	fmt.Println(c.ListenAddrs()[0])

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
}
