// Package sidebyside is the driver of the interop/cmd programs that send the same
// requests to a Kafka broker and a Strata broker and compare, case by case, what
// each answers.
package sidebyside

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Result is one case's answer in short, as a program renders it.
type Result struct{ Name, Out string }

// Main parses -kafka, -strata, -v and -record, runs run against each broker in
// turn within timeout, prints the cases that differ (every case with -v) and
// exits: 0 when none differ, 1 when some do, 2 when a run fails. run must return
// the same cases, in the same order, for both brokers. With -record DIR the
// answers are also written to DIR/kafka.txt and DIR/strata.txt (WriteResults),
// for a test to compare a later Strata with.
func Main(prog string, timeout time.Duration, run func(ctx context.Context, addr string) ([]Result, error)) {
	kafkaAddr := flag.String("kafka", "", "the Kafka broker's SASL_PLAINTEXT address")
	strataAddr := flag.String("strata", "", "the Strata broker's SASL_PLAINTEXT address")
	verbose := flag.Bool("v", false, "print every case, not only those that differ")
	record := flag.String("record", "", "write each broker's answers to this directory (kafka.txt, strata.txt)")
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
	if *record != "" {
		for i, name := range []string{"kafka.txt", "strata.txt"} {
			if err := writeResultsFile(filepath.Join(*record, name), results[i]); err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", prog, err)
				os.Exit(2)
			}
		}
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

func writeResultsFile(path string, rs []Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WriteResults(f, rs); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// WriteResults writes rs one case a line: its name, a tab, its answer.
func WriteResults(w io.Writer, rs []Result) error {
	bw := bufio.NewWriter(w)
	for _, r := range rs {
		fmt.Fprintf(bw, "%s\t%s\n", r.Name, r.Out)
	}
	return bw.Flush()
}

// ReadResults reads what WriteResults wrote.
func ReadResults(r io.Reader) ([]Result, error) {
	var rs []Result
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, out, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			return nil, fmt.Errorf("line %d: no tab", len(rs)+1)
		}
		rs = append(rs, Result{Name: name, Out: out})
	}
	return rs, sc.Err()
}
