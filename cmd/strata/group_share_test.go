package main

import (
	"strings"
	"testing"
)

// TestShareOffsets runs strata group share-offsets against the shared node: reset
// (dry run, then to earliest, an offset, latest and a time), describe (start offsets
// and lag) and delete, with --output json, and the errors a user meets first.
func TestShareOffsets(t *testing.T) {
	topic := topicName(t)
	group := topic + "-share"
	mustRun(t, "topic", "create", topic, "-p", "1")
	if r := runIn(t, "a\nb\nc\nd\n", "produce", topic); r.code != 0 {
		t.Fatalf("produce: %s", r)
	}
	reset := func(to string, execute bool) resetOffsetsJSON {
		t.Helper()
		args := []string{"group", "share-offsets", "reset", group, "--to", to, "--topic", topic}
		if execute {
			args = append(args, "--execute")
		}
		var out resetOffsetsJSON
		mustJSON(t, &out, args...)
		if out.Executed != execute || len(out.Offsets) != 1 || out.Offsets[0].Topic != topic || out.Offsets[0].Partition != 0 {
			t.Fatalf("reset --to %s: %+v", to, out)
		}
		return out
	}
	describe := func() []shareOffsetJSON {
		t.Helper()
		var out []describedShareOffsetsJSON
		mustJSON(t, &out, "group", "share-offsets", "describe", group)
		if len(out) != 1 || out[0].Group != group {
			t.Fatalf("describe: %+v", out)
		}
		return out[0].Offsets
	}
	want := func(start, lag int64) {
		t.Helper()
		got := describe()
		if len(got) != 1 || got[0].Topic != topic || got[0].StartOffset != start || got[0].Lag != lag || got[0].Error != "" {
			t.Fatalf("describe: %+v, want start %d lag %d", got, start, lag)
		}
	}

	// A dry run changes nothing: the group does not exist yet.
	if out := reset("earliest", false); out.Offsets[0].Current != -1 || out.Offsets[0].New != 0 {
		t.Errorf("dry run: %+v", out.Offsets)
	}
	if got := describe(); len(got) != 0 {
		t.Errorf("describe of a group that does not exist: %+v", got)
	}
	// Setting offsets creates the share group, as in Kafka.
	reset("earliest", true)
	want(0, 4)
	if out := reset("2", true); out.Offsets[0].Current != 0 || out.Offsets[0].New != 2 {
		t.Errorf("reset --to 2: %+v", out.Offsets)
	}
	want(2, 2)
	reset("latest", true)
	want(4, 0)
	reset("2000-01-01T00:00:00Z", true) // before every record: the first one
	want(0, 4)
	r := mustRun(t, "group", "share-offsets", "describe", group)
	if !strings.Contains(r.stdout, "START-OFFSET") || !strings.Contains(r.stdout, topic) {
		t.Errorf("describe table:\n%s", r.stdout)
	}

	var del deletedShareOffsetsJSON
	mustJSON(t, &del, "group", "share-offsets", "delete", group, "--topic", topic)
	if del.Group != group || len(del.Topics) != 1 || del.Topics[0] != topic {
		t.Errorf("delete: %+v", del)
	}
	if got := describe(); len(got) != 0 {
		t.Errorf("describe after delete: %+v", got)
	}

	for _, args := range [][]string{
		{"group", "share-offsets", "reset", group, "--topic", topic},
		{"group", "share-offsets", "reset", group, "--to", "earliest"},
		{"group", "share-offsets", "reset", group, "--to", "nowhere", "--topic", topic},
		{"group", "share-offsets", "delete", group},
	} {
		if r := run(t, args...); r.code != 2 {
			t.Errorf("%v: %s, want a usage error", args, r)
		}
	}
	if r := run(t, "group", "share-offsets", "reset", group, "--to", "earliest", "--topic", "no-such-topic", "--execute"); r.code != 1 {
		t.Errorf("reset of a topic that does not exist: %s", r)
	}
}
