// Package sidebyside is the driver of the interop/cmd programs that send the same
// requests to a Kafka broker and a Strata broker and compare, case by case, what
// each answers.
package sidebyside

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"
)

// Result is one case's answer in short, as a program renders it.
type Result struct{ Name, Out string }

// Main parses -kafka, -strata and -v, runs run against each broker in turn
// within timeout, prints the cases that differ (every case with -v) and exits:
// 0 when none differ, 1 when some do, 2 when a run fails. run must return the
// same cases, in the same order, for both brokers.
func Main(prog string, timeout time.Duration, run func(ctx context.Context, addr string) ([]Result, error)) {
	kafkaAddr := flag.String("kafka", "", "the Kafka broker's SASL_PLAINTEXT address")
	strataAddr := flag.String("strata", "", "the Strata broker's SASL_PLAINTEXT address")
	verbose := flag.Bool("v", false, "print every case, not only those that differ")
	flag.Parse()
	if *kafkaAddr == "" || *strataAddr == "" {
		fmt.Fprintf(os.Stderr, "%s: -kafka and -strata are required\n", prog)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var results [2][]Result
	for i, addr := range []string{*kafkaAddr, *strataAddr} {
		rs, err := run(ctx, addr)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %s: %v\n", prog, addr, err)
			os.Exit(2)
		}
		results[i] = rs
	}
	if len(results[0]) != len(results[1]) {
		fmt.Fprintf(os.Stderr, "%s: %d cases against Kafka, %d against Strata\n", prog, len(results[0]), len(results[1]))
		os.Exit(2)
	}
	differ := 0
	for i, k := range results[0] {
		s := results[1][i]
		same := k.Out == s.Out
		if !same {
			differ++
		}
		if !same || *verbose {
			mark := "same"
			if !same {
				mark = "DIFFERS"
			}
			fmt.Printf("== %s [%s]\n   kafka:  %s\n   strata: %s\n", k.Name, mark, k.Out, s.Out)
		}
	}
	fmt.Printf("%d cases, %d differ\n", len(results[0]), differ)
	if differ > 0 {
		os.Exit(1)
	}
}
