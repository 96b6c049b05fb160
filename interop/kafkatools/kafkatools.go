// Package kafkatools runs Apache Kafka's own command-line tools (kafka-topics,
// kafka-configs, kafka-acls, kafka-reassign-partitions, ...) against a broker, so tests
// can drive Strata exactly as an operator of Kafka would.
//
// The tools come from Maven Central: interop/install.sh resolves the kafka-tools
// artifact named in pom.xml beside this file into target/jars. A tool is run as the
// shell script of a Kafka distribution runs it: `java -cp 'target/jars/*' MAIN ARGS`,
// with the main class the script names (see Tools).
//
// Calling protocol for a test:
//
//  1. Require(t): skips loudly when java or the jars are missing, or fails when CI=true
//     (CI must never pass by skipping).
//  2. Run(ctx, "kafka-topics", "--bootstrap-server", addr, "--list") for the output and
//     exit status, or MustRun(t, ...) to fail the test on a non-zero exit.
package kafkatools

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// Tools maps each tool's script name in a Kafka 4.4 distribution (without ".sh") to
// the main class that script runs.
var Tools = map[string]string{
	"kafka-acls":                      "org.apache.kafka.tools.AclCommand",
	"kafka-broker-api-versions":       "org.apache.kafka.tools.BrokerApiVersionsCommand",
	"kafka-client-metrics":            "org.apache.kafka.tools.ClientMetricsCommand",
	"kafka-cluster":                   "org.apache.kafka.tools.ClusterTool",
	"kafka-configs":                   "org.apache.kafka.tools.ConfigCommand",
	"kafka-console-consumer":          "org.apache.kafka.tools.consumer.ConsoleConsumer",
	"kafka-console-producer":          "org.apache.kafka.tools.ConsoleProducer",
	"kafka-console-share-consumer":    "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
	"kafka-consumer-groups":           "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
	"kafka-consumer-perf-test":        "org.apache.kafka.tools.ConsumerPerformance",
	"kafka-delegation-tokens":         "org.apache.kafka.tools.DelegationTokenCommand",
	"kafka-delete-records":            "org.apache.kafka.tools.DeleteRecordsCommand",
	"kafka-e2e-latency":               "org.apache.kafka.tools.EndToEndLatency",
	"kafka-features":                  "org.apache.kafka.tools.FeatureCommand",
	"kafka-get-offsets":               "org.apache.kafka.tools.GetOffsetShell",
	"kafka-groups":                    "org.apache.kafka.tools.GroupsCommand",
	"kafka-leader-election":           "org.apache.kafka.tools.LeaderElectionCommand",
	"kafka-log-dirs":                  "org.apache.kafka.tools.LogDirsCommand",
	"kafka-metadata-quorum":           "org.apache.kafka.tools.MetadataQuorumCommand",
	"kafka-producer-perf-test":        "org.apache.kafka.tools.ProducerPerformance",
	"kafka-reassign-partitions":       "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
	"kafka-replica-verification":      "org.apache.kafka.tools.ReplicaVerificationTool",
	"kafka-share-groups":              "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
	"kafka-streams-application-reset": "org.apache.kafka.tools.StreamsResetter",
	"kafka-streams-groups":            "org.apache.kafka.tools.streams.StreamsGroupCommand",
	"kafka-topics":                    "org.apache.kafka.tools.TopicCommand",
	"kafka-transactions":              "org.apache.kafka.tools.TransactionsCommand",
	"kafka-verifiable-consumer":       "org.apache.kafka.tools.VerifiableConsumer",
	"kafka-verifiable-producer":       "org.apache.kafka.tools.VerifiableProducer",
}

// javaFlags keep each short-lived JVM cheap on a small shared machine: the optimising
// JIT and a parallel collector cost more than they save in a run of a few seconds.
// The log level is a Kafka distribution's for its tools: warnings and errors on stderr.
var javaFlags = []string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto",
	"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"}

// JarsDir is the directory interop/install.sh fills with the tools' jars.
func JarsDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "target", "jars")
}

// Missing says why the tools cannot run here, or "" when they can.
func Missing() string {
	if _, err := exec.LookPath("java"); err != nil {
		return "java is not on PATH"
	}
	jars, _ := filepath.Glob(filepath.Join(JarsDir(), "kafka-tools-*.jar"))
	if len(jars) == 0 {
		return "no kafka-tools jar in " + JarsDir()
	}
	return ""
}

// Require skips the test loudly when the tools cannot run, or fails it when CI=true.
func Require(t testing.TB) {
	t.Helper()
	why := Missing()
	if why == "" {
		return
	}
	msg := "KAFKA COMMAND-LINE TOOLS CANNOT RUN: " + why + "; run interop/install.sh"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip("\n" + strings.Repeat("!", 78) + "\n!!! SKIPPED " + msg + "\n" + strings.Repeat("!", 78))
}

// Result is what one tool run printed and how it exited.
type Result struct {
	Stdout, Stderr string
	ExitCode       int
}

// Run runs tool (a key of Tools) with args and waits for it. err is non-nil only when
// the tool could not be started or ctx ended first; a tool that ran and failed is
// reported by a non-zero Result.ExitCode.
func Run(ctx context.Context, tool string, args ...string) (Result, error) {
	return RunInput(ctx, "", tool, args...)
}

// RunInput is Run with input on the tool's standard input, as `echo ... |
// kafka-console-producer` would give it.
func RunInput(ctx context.Context, input, tool string, args ...string) (Result, error) {
	main, ok := Tools[tool]
	if !ok {
		return Result{}, fmt.Errorf("kafkatools: unknown tool %q", tool)
	}
	cmdArgs := slices.Concat(javaFlags, []string{"-cp", filepath.Join(JarsDir(), "*"), main}, args)
	cmd := exec.CommandContext(ctx, "java", cmdArgs...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Stdin = strings.NewReader(input)
	err := cmd.Run()
	res := Result{Stdout: stdout.String(), Stderr: stderr.String()}
	if ctx.Err() != nil {
		return res, fmt.Errorf("kafkatools: %s: %w\nstdout:\n%s\nstderr:\n%s", tool, ctx.Err(), res.Stdout, res.Stderr)
	}
	if exitErr, ok := err.(*exec.ExitError); ok {
		res.ExitCode = exitErr.ExitCode()
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("kafkatools: %s: %w", tool, err)
	}
	return res, nil
}

// DefaultTimeout bounds a MustRun: a JVM start and a few admin round trips take
// seconds, but a tool stuck retrying against a broker must not hang the suite.
const DefaultTimeout = 2 * time.Minute

// MustRun runs tool like Run and fails the test unless it exits 0. It returns stdout.
func MustRun(t testing.TB, tool string, args ...string) string {
	t.Helper()
	return MustRunInput(t, "", tool, args...)
}

// MustRunInput is MustRun with input on the tool's standard input.
func MustRunInput(t testing.TB, input, tool string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	res, err := RunInput(ctx, input, tool, args...)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("%s %s: exit %d\nstdout:\n%s\nstderr:\n%s", tool, strings.Join(args, " "), res.ExitCode, res.Stdout, res.Stderr)
	}
	return res.Stdout
}

// WriteScripts writes an executable script for every tool into dir, named as in
// a Kafka distribution without ".sh" (dir/kafka-topics, ...), so shell commands
// written for Kafka's tools run unchanged with dir on the PATH.
func WriteScripts(dir string) error {
	for tool, main := range Tools {
		script := fmt.Sprintf("#!/bin/sh\nexec java %s -cp '%s' %s \"$@\"\n",
			strings.Join(javaFlags, " "), filepath.Join(JarsDir(), "*"), main)
		if err := os.WriteFile(filepath.Join(dir, tool), []byte(script), 0o755); err != nil {
			return fmt.Errorf("kafkatools: %w", err)
		}
	}
	return nil
}
