package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-stream/strata/interop/kafkatools"
)

// TestKafkaToolsSweep runs, once each against one broker, the Kafka 4.4 tools that
// TestKafkaTools and the feature tests do not: the perf and verifiable clients, the
// Streams reset tool, the consumer-group offset subcommands, list-endpoints,
// features, client quotas, dynamic broker configs and kafka-replica-verification.
// Each step checks the tool's output, and where the tool changes state, franz-go
// reads the state back. The last rows of the table are tools Strata refuses on
// purpose: each must fail fast with Kafka's own error. docs/kafka-tools.md is the
// matrix these steps back.
func TestKafkaToolsSweep(t *testing.T) {
	tgt, bs, adm := startToolsTarget(t)
	ctx := context.Background()
	emptyProps := filepath.Join(t.TempDir(), "empty.properties")
	if err := os.WriteFile(emptyProps, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	const topic, perfGroup, vcGroup = "sweep", "sweep-perf", "sweep-vc"
	// committed checks what perfGroup has committed on topic: want maps partition to
	// offset (nil: nothing committed).
	committed := func(want map[int32]int64) func(t *testing.T, out string) {
		return func(t *testing.T, _ string) {
			offs, err := adm.FetchOffsets(ctx, perfGroup)
			if err != nil {
				t.Fatal(err)
			}
			got := map[int32]int64{}
			offs.Each(func(o kadm.OffsetResponse) {
				if o.Topic == topic && o.Err == nil && o.At >= 0 {
					got[o.Partition] = o.At
				}
			})
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s committed %v on %s, want %v", perfGroup, got, topic, want)
			}
		}
	}
	committedSum := func(want int64) func(t *testing.T, out string) {
		return func(t *testing.T, _ string) {
			offs, err := adm.FetchOffsets(ctx, perfGroup)
			if err != nil {
				t.Fatal(err)
			}
			var sum int64
			offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
			if sum != want {
				t.Errorf("%s committed offsets add up to %d, want %d", perfGroup, sum, want)
			}
		}
	}

	steps := []struct {
		name, tool string
		args       []string
		fails      bool                           // refused on purpose: must exit non-zero
		want       []string                       // regular expressions the output must match
		check      func(t *testing.T, out string) // state read back after the tool ran
	}{
		{"create topic", "kafka-topics", slices.Concat(bs, []string{"--create", "--topic", topic, "--partitions", "2", "--replication-factor", "1"}),
			false, []string{`Created topic sweep\.`}, nil},
		{"producer perf test", "kafka-producer-perf-test", []string{"--topic", topic, "--num-records", "200", "--record-size", "100",
			"--throughput", "-1", "--command-property", "bootstrap.servers=" + tgt.bootstrap},
			false, []string{`(?m)^200 records sent, `}, nil},
		// Keys 0 and 2 hash to partition 0, 1, 3 and 4 to partition 1: neither partition is
		// empty whatever the perf test's sticky partitioner did, so the reset to offset 1
		// below is not clamped to an empty partition's end.
		{"verifiable producer", "kafka-verifiable-producer", slices.Concat(bs, []string{"--topic", topic, "--max-messages", "5", "--repeating-keys", "5"}),
			false, []string{`"name":"tool_data","sent":5,"acked":5`}, func(t *testing.T, _ string) {
				ends, err := adm.ListEndOffsets(ctx, topic)
				if err != nil {
					t.Fatal(err)
				}
				var sum int64
				ends.Each(func(o kadm.ListedOffset) { sum += o.Offset })
				if sum != 205 {
					t.Errorf("%s holds %d records, want 205", topic, sum)
				}
				ends.Each(func(o kadm.ListedOffset) {
					if o.Offset < 2 {
						t.Errorf("%s-%d holds %d records, want at least the 2 keyed ones", topic, o.Partition, o.Offset)
					}
				})
			}},
		// The consumer commits what it read when it closes (auto-commit).
		{"consumer perf test", "kafka-consumer-perf-test", slices.Concat(bs, []string{"--topic", topic, "--num-records", "205",
			"--group", perfGroup, "--timeout", "60000"}),
			false, []string{`, 205, `}, committedSum(205)},
		{"verifiable consumer", "kafka-verifiable-consumer", slices.Concat(bs, []string{"--topic", topic, "--group-id", vcGroup, "--max-messages", "5"}),
			false, []string{`"name":"partitions_assigned"`, `"name":"offsets_committed".*"success":true`}, nil},
		// Strata has no streams groups: the list is empty, and holds no consumer group.
		{"streams groups list", "kafka-streams-groups", slices.Concat(bs, []string{"--list"}), false, nil, func(t *testing.T, out string) {
			if strings.Contains(out, perfGroup) {
				t.Errorf("kafka-streams-groups --list shows the consumer group %s:\n%s", perfGroup, out)
			}
		}},
		{"streams application reset", "kafka-streams-application-reset", slices.Concat(bs, []string{"--application-id", perfGroup, "--input-topics", topic}),
			false, []string{`Topic: sweep Partition: 0 Offset: 0`, `Topic: sweep Partition: 1 Offset: 0`}, committed(map[int32]int64{0: 0, 1: 0})},
		{"consumer groups reset offsets", "kafka-consumer-groups", slices.Concat(bs, []string{"--reset-offsets", "--group", perfGroup, "--topic", topic, "--to-offset", "1", "--execute"}),
			false, []string{`(?m)^sweep-perf\s+sweep\s+0\s+1\s*$`, `(?m)^sweep-perf\s+sweep\s+1\s+1\s*$`}, committed(map[int32]int64{0: 1, 1: 1})},
		{"consumer groups delete offsets", "kafka-consumer-groups", slices.Concat(bs, []string{"--delete-offsets", "--group", perfGroup, "--topic", topic}),
			false, []string{`Request succeeded for deleting offsets from group sweep-perf\.`, `(?m)^sweep\s+0\s+Successful`}, committed(nil)},
		{"consumer groups delete", "kafka-consumer-groups", slices.Concat(bs, []string{"--delete", "--group", vcGroup}),
			false, []string{`Deletion of requested consumer groups \('sweep-vc'\) was successful\.`}, func(t *testing.T, _ string) {
				groups, err := adm.ListGroups(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if slices.Contains(groups.Groups(), vcGroup) {
					t.Errorf("%s still listed after --delete: %v", vcGroup, groups.Groups())
				}
			}},
		{"end-to-end latency", "kafka-e2e-latency", slices.Concat(bs, []string{"--topic", topic, "--num-records", "20", "--producer-acks", "all", "--record-size", "100"}),
			false, []string{`Avg latency: \d`}, nil},
		{"list endpoints with fenced brokers", "kafka-cluster", slices.Concat([]string{"list-endpoints", "--include-fenced-brokers"}, bs),
			false, []string{`(?m)^1\s+127\.0\.0\.1\s+\d+\s+null\s+unfenced\s+broker\s*$`}, nil},
		// Each feature Strata advertises runs at one level; the others are absent.
		{"features describe", "kafka-features", slices.Concat(bs, []string{"describe"}),
			false, []string{
				`Feature: group\.version\s+SupportedMinVersion: 1\s+SupportedMaxVersion: 1\s+FinalizedVersionLevel: 1\s`,
				`Feature: kraft\.version\s+SupportedMinVersion: 1\s+SupportedMaxVersion: 1\s+FinalizedVersionLevel: 1\s`,
				`Feature: share\.version\s+SupportedMinVersion: 2\s+SupportedMaxVersion: 2\s+FinalizedVersionLevel: 2\s`,
				`Feature: streams\.version\s+SupportedMinVersion: 1\s+SupportedMaxVersion: 1\s+FinalizedVersionLevel: 1\s`,
				`Feature: transaction\.version\s+SupportedMinVersion: 2\s+SupportedMaxVersion: 2\s+FinalizedVersionLevel: 2\s`,
			}, func(t *testing.T, out string) {
				for _, absent := range []string{"metadata.version", "eligible.leader.replicas.version"} {
					if strings.Contains(out, absent) {
						t.Errorf("kafka-features describe lists %s, which Strata does not advertise:\n%s", absent, out)
					}
				}
			}},
		{"features upgrade refused", "kafka-features", slices.Concat(bs, []string{"upgrade", "--feature", "eligible.leader.replicas.version=1"}),
			true, []string{`Invalid update version 1 for feature eligible\.leader\.replicas\.version\. Local controller 1 does not support this feature\.`}, nil},
		{"features downgrade refused", "kafka-features", slices.Concat(bs, []string{"downgrade", "--feature", "transaction.version=1"}),
			true, []string{`Invalid update version 1 for feature transaction\.version\. Local controller 1 only supports versions 2\.`}, nil},
		{"features disable refused", "kafka-features", slices.Concat(bs, []string{"disable", "--feature", "group.version"}),
			true, []string{`Invalid update version 0 for feature group\.version\. Local controller 1 only supports versions 1\.`}, nil},
		{"features upgrade of the metadata version refused", "kafka-features", slices.Concat(bs, []string{"upgrade", "--metadata", "4.4-IV0"}),
			true, []string{`for feature metadata\.version\. Local controller 1 does not support this feature\.`}, nil},
		{"client quota alter", "kafka-configs", slices.Concat(bs, []string{"--alter", "--entity-type", "clients", "--entity-name", "sweep-client", "--add-config", "consumer_byte_rate=100000"}),
			false, []string{`Completed updating config for client sweep-client\.`}, nil},
		{"client quota describe", "kafka-configs", slices.Concat(bs, []string{"--describe", "--entity-type", "clients"}),
			false, []string{`Quota configs for client-id 'sweep-client' are consumer_byte_rate=100000\.0`}, nil},
		{"dynamic broker config alter", "kafka-configs", slices.Concat(bs, []string{"--alter", "--entity-type", "brokers", "--entity-name", "1", "--add-config", "log.retention.ms=7200000"}),
			false, []string{`Completed updating config for broker 1\.`}, nil},
		{"broker configs describe all", "kafka-configs", slices.Concat(bs, []string{"--describe", "--entity-type", "brokers", "--entity-name", "1", "--all"}),
			false, []string{`log\.retention\.ms=7200000 sensitive=false synonyms=\{DYNAMIC_BROKER_CONFIG:log\.retention\.ms=7200000, DEFAULT_CONFIG:log\.retention\.hours=168\}`}, nil},
		{"quorum replication human readable", "kafka-metadata-quorum", slices.Concat(bs, []string{"describe", "--replication", "--human-readable"}),
			false, []string{`(?m)^1\s+\S+\s+\d+\s+0\s+.*ago.*Leader`}, nil},
		// Refused, as Kafka 4.4 refuses them on a PLAINTEXT listener
		// (TestKafkaDelegationTokens runs the tool over SASL).
		{"delegation tokens refused on plaintext", "kafka-delegation-tokens", slices.Concat(bs, []string{"--command-config", emptyProps, "--describe"}),
			true, []string{`Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels`}, nil},
		{"acls without an authorizer", "kafka-acls", slices.Concat(bs, []string{"--list"}),
			true, []string{`SecurityDisabledException: No Authorizer is configured on the broker`}, nil},
		{"acl removal without an authorizer", "kafka-acls", slices.Concat(bs, []string{"--remove", "--force",
			"--allow-principal", "User:alice", "--operation", "Read", "--topic", topic}),
			true, []string{`SecurityDisabledException: No Authorizer is configured\.`}, nil},
	}
	for _, s := range steps {
		ok := t.Run(s.name, func(t *testing.T) {
			rctx, cancel := context.WithTimeout(ctx, kafkatools.DefaultTimeout)
			defer cancel()
			res, err := kafkatools.Run(rctx, s.tool, s.args...)
			if err != nil {
				t.Fatal(err)
			}
			out := res.Stdout + res.Stderr
			if failed := res.ExitCode != 0; failed != s.fails {
				t.Fatalf("%s %s: exit %d, want failure %v\n%s", s.tool, strings.Join(s.args, " "), res.ExitCode, s.fails, out)
			}
			for _, w := range s.want {
				if !regexp.MustCompile(w).MatchString(out) {
					t.Errorf("%s output does not match %q:\n%s", s.tool, w, out)
				}
			}
			if s.check != nil {
				s.check(t, out)
			}
		})
		if !ok && !s.fails {
			// Later steps build on this one's state.
			t.FailNow()
		}
	}

	// kafka-replica-verification runs until stopped: it is stopped after 25 s (its
	// first report comes a second after the JVM is up). It sends Fetch v18 without
	// asking ApiVersions first; "max lag is -1 for partition null" means no fetch
	// was answered.
	t.Run("replica verification", func(t *testing.T) {
		rctx, cancel := context.WithTimeout(ctx, 25*time.Second)
		defer cancel()
		res, err := kafkatools.Run(rctx, "kafka-replica-verification", "--broker-list", tgt.bootstrap,
			"--topics-include", topic, "--time", "-2", "--report-interval-ms", "1000")
		if rctx.Err() == nil {
			t.Fatalf("kafka-replica-verification stopped by itself: exit %d, %v\n%s%s", res.ExitCode, err, res.Stdout, res.Stderr)
		}
		if !regexp.MustCompile(`max lag is 0 for partition sweep-[01] at offset \d+ among 2 partitions`).MatchString(res.Stdout) {
			t.Errorf("kafka-replica-verification reports no verified partition:\n%s%s", res.Stdout, res.Stderr)
		}
	})
}
