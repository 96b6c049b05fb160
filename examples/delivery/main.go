// Command delivery shows what commit timing does to delivery, against a running
// Strata (or Kafka) broker:
//
//	go run ./examples/delivery --brokers 127.0.0.1:9092
//
// Each scenario produces 100 orders to a fresh one-partition topic. Consumer A
// reads them, "crashes" part way (closes without a final commit), and consumer B in
// the same group takes over from the committed offset:
//
//   - at-least-once: A commits after processing. What A processed after its last
//     commit is processed again by B: duplicates, nothing lost.
//   - at-most-once: A commits before processing. What A committed but never
//     processed is skipped by B: lost, no duplicates.
//   - idempotent consumer: at-least-once delivery, but processing is an insert keyed
//     by order id that ignores ids it has seen. Deliveries still repeat; the effect
//     (rows written) happens exactly once.
//
// Exactly-once is an effect built from idempotent processing (or transactions),
// never a delivery guarantee.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "bootstrap brokers, comma separated")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reports, err := runAll(ctx, strings.Split(*brokers, ","))
	if err != nil {
		fmt.Fprintln(os.Stderr, "delivery:", err)
		os.Exit(1)
	}
	for _, r := range reports {
		fmt.Println(r)
	}
}
