package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/wait"
)

// findConfig returns the named config of a described topic.
func findConfig(t *testing.T, d describedTopicJSON, name string) describedConfJSON {
	t.Helper()
	for _, c := range d.Configs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("topic %s: no config %s in %+v", d.Topic, name, d.Configs)
	return describedConfJSON{}
}

func describeOne(t *testing.T, topic string) describedTopicJSON {
	t.Helper()
	var out []describedTopicJSON
	mustJSON(t, &out, "topic", "describe", topic)
	if len(out) != 1 || out[0].Topic != topic {
		t.Fatalf("describe %s: got %+v", topic, out)
	}
	return out[0]
}

func TestTopicRoundTrip(t *testing.T) {
	topic := topicName(t)

	r := mustRun(t, "topic", "create", topic, "-p", "2", "-r", "1", "-c", "retention.ms=3600000")
	if want := "created topic " + topic + ": 2 partitions, replication factor 1, id "; !strings.HasPrefix(r.stdout, want) {
		t.Fatalf("create printed %q, want prefix %q", r.stdout, want)
	}
	if r := run(t, "topic", "create", topic); r.code != 1 || !strings.Contains(r.err.Error(), "TOPIC_ALREADY_EXISTS") {
		t.Fatalf("creating it again: %s", r)
	}

	t.Run("list", func(t *testing.T) {
		r := mustRun(t, "topic", "list")
		if !strings.HasPrefix(r.stdout, "TOPIC") || !hasRow(r.stdout, topic, "2", "1") {
			t.Fatalf("table list lacks %s:\n%s", topic, r.stdout)
		}
		var listed []listedTopicJSON
		mustJSON(t, &listed, "topic", "list")
		found := false
		for _, l := range listed {
			if l.Topic == topic {
				found = true
				if l.Partitions != 2 || l.ReplicationFactor != 1 || l.Internal || l.ID == "" {
					t.Fatalf("listed %+v", l)
				}
			}
		}
		if !found {
			t.Fatalf("json list lacks %s: %+v", topic, listed)
		}
	})

	t.Run("describe", func(t *testing.T) {
		var twice []describedTopicJSON
		mustJSON(t, &twice, "topic", "describe", topic, topic)
		if len(twice) != 1 {
			t.Fatalf("a topic named twice is described %d times", len(twice))
		}
		d := describeOne(t, topic)
		if len(d.Partitions) != 2 || d.ReplicationFactor != 1 {
			t.Fatalf("described %+v", d)
		}
		for i, p := range d.Partitions {
			if p.Partition != int32(i) || p.Leader != 1 || len(p.Replicas) != 1 || len(p.ISR) != 1 ||
				p.LogStartOffset != 0 || p.HighWatermark != 0 || p.LocalSizeBytes != 0 ||
				p.LocalLogStartOffset != nil || p.RemoteEndOffset != nil || p.Error != "" {
				t.Fatalf("partition %d: %+v", i, p)
			}
		}
		if c := findConfig(t, d, "retention.ms"); *c.Value != "3600000" || c.Source != "DYNAMIC_TOPIC_CONFIG" || c.Default {
			t.Fatalf("retention.ms: %+v", c)
		}
		r := mustRun(t, "topic", "describe", topic)
		for _, want := range []string{"Topic:              " + topic, "PARTITION  LEADER  EPOCH  REPLICAS  ISR  LOG-START  HIGH-WATERMARK  LOCAL-SIZE"} {
			if !strings.Contains(r.stdout, want) {
				t.Fatalf("describe table lacks %q:\n%s", want, r.stdout)
			}
		}
		if !hasRow(r.stdout, "retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG") || hasRow(r.stdout, "cleanup.policy") {
			t.Fatalf("table shows overrides only:\n%s", r.stdout)
		}
		if r := mustRun(t, "topic", "describe", topic, "--all-configs"); !hasRow(r.stdout, "cleanup.policy", "delete", "DEFAULT_CONFIG") {
			t.Fatalf("--all-configs lacks the defaults:\n%s", r.stdout)
		}
	})

	t.Run("alter-config", func(t *testing.T) {
		var altered alteredConfigJSON
		mustJSON(t, &altered, "topic", "alter-config", topic, "--set", "max.message.bytes=2000000", "--delete", "retention.ms")
		if altered.Set["max.message.bytes"] != "2000000" || len(altered.Deleted) != 1 {
			t.Fatalf("altered %+v", altered)
		}
		d := describeOne(t, topic)
		if c := findConfig(t, d, "max.message.bytes"); *c.Value != "2000000" || c.Source != "DYNAMIC_TOPIC_CONFIG" {
			t.Fatalf("max.message.bytes: %+v", c)
		}
		if c := findConfig(t, d, "retention.ms"); !c.Default {
			t.Fatalf("retention.ms after delete: %+v", c)
		}
		if r := run(t, "topic", "alter-config", topic); r.code != 2 {
			t.Fatalf("nothing to alter: %s", r)
		}
		if r := run(t, "topic", "alter-config", topic, "--set", "no.such.config=1"); r.code != 1 {
			t.Fatalf("unknown config: %s", r)
		}
	})

	t.Run("add-partitions", func(t *testing.T) {
		env := map[string]string{"STRATA_BROKERS": broker(t)}
		if r := (invocation{env: env}).run(t, "topic", "add-partitions", topic, "--add", "1"); r.code != 2 || !strings.Contains(r.err.Error(), "--yes") {
			t.Fatalf("without --yes on a pipe: %s", r)
		}
		r := invocation{env: env, stdin: "n\n", stdinTerminal: true}.run(t, "topic", "add-partitions", topic, "--add", "1")
		if r.code != 1 || !strings.Contains(r.stderr, "[y/N]") || !strings.Contains(r.stderr, "per-key order") {
			t.Fatalf("answering no: %s", r)
		}
		if n := len(describeOne(t, topic).Partitions); n != 2 {
			t.Fatalf("after answering no: %d partitions", n)
		}
		r = invocation{env: env, stdin: "y\n", stdinTerminal: true}.run(t, "topic", "add-partitions", topic, "--add", "1")
		if r.code != 0 || r.stdout != "topic "+topic+": 2 -> 3 partitions\n" {
			t.Fatalf("answering yes: %s", r)
		}
		var added addedPartitionsJSON
		mustJSON(t, &added, "topic", "add-partitions", topic, "--total", "5", "--yes")
		if added.PartitionsBefore != 3 || added.Partitions != 5 {
			t.Fatalf("added %+v", added)
		}
		if n := len(describeOne(t, topic).Partitions); n != 5 {
			t.Fatalf("after --total 5: %d partitions", n)
		}
		if r := run(t, "topic", "add-partitions", topic, "--total", "4", "--yes"); r.code != 1 {
			t.Fatalf("shrinking: %s", r)
		}
		if r := run(t, "topic", "add-partitions", topic, "--add", "1", "--total", "9", "--yes"); r.code != 2 {
			t.Fatalf("--add with --total: %s", r)
		}
	})

	t.Run("delete", func(t *testing.T) {
		var deleted []deletedTopicJSON
		mustJSON(t, &deleted, "topic", "delete", topic)
		if len(deleted) != 1 || !deleted[0].Deleted {
			t.Fatalf("deleted %+v", deleted)
		}
		if r := mustRun(t, "topic", "list"); hasRow(r.stdout, topic) {
			t.Fatalf("still listed:\n%s", r.stdout)
		}
		if r := run(t, "topic", "describe", topic); r.code != 1 || !strings.Contains(r.err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
			t.Fatalf("describing a deleted topic: %s", r)
		}
		if r := run(t, "topic", "delete", topic); r.code != 1 {
			t.Fatalf("deleting twice: %s", r)
		}
	})
}

// hasRow reports whether a table has a row starting with these cells.
func hasRow(table string, cells ...string) bool {
	for line := range strings.Lines(table) {
		f := strings.Fields(line)
		if len(f) >= len(cells) && slices.Equal(f[:len(cells)], cells) {
			return true
		}
	}
	return false
}

// TestTopicDescribeTiered checks that describe shows where a tiered topic's data
// lives: the leader's local bytes, the first local offset and the uploaded end.
func TestTopicDescribeTiered(t *testing.T) {
	topic := topicName(t)
	mustRun(t, "topic", "create", topic, "-p", "1", "-r", "1", "-c", "remote.storage.enable=true",
		"-c", "internal.segment.bytes=16384", "-c", "local.retention.bytes=32768")
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker(t)), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	value := bytes.Repeat([]byte("x"), 1000)
	const records = 200 // about 200 KB: a dozen 16 KiB segments, most of them only remote
	for range records {
		if err := cl.ProduceSync(t.Context(), &kgo.Record{Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var p partitionJSON
	wait.Within(t, 30*time.Second, "segments uploaded and deleted locally", func() bool {
		p = describeOne(t, topic).Partitions[0]
		return p.RemoteEndOffset != nil && p.LocalLogStartOffset != nil && *p.LocalLogStartOffset > 0
	})
	if p.LogStartOffset != 0 || p.HighWatermark != records || *p.RemoteEndOffset < *p.LocalLogStartOffset-1 ||
		p.LocalSizeBytes <= 0 || p.LocalSizeBytes >= records*int64(len(value)) {
		t.Fatalf("tiered partition: %+v (local start %d, remote end %d)", p, *p.LocalLogStartOffset, *p.RemoteEndOffset)
	}
	r := mustRun(t, "topic", "describe", topic)
	if !strings.Contains(r.stdout, "LOCAL-SIZE  LOCAL-START  REMOTE-END") {
		t.Fatalf("describe table lacks the tiered columns:\n%s", r.stdout)
	}
}
