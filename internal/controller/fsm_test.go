package controller

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/strata-stream/strata/internal/metadata"
)

// TestApplyNewerRecordVersion: a batch this build cannot decode because a newer
// Strata wrote it stops the node (a panic naming the entry) instead of being
// skipped, which would leave this node's image behind the others'; a batch
// that is merely corrupt is still the proposer's error.
func TestApplyNewerRecordVersion(t *testing.T) {
	f := newFSM(slog.New(slog.NewTextHandler(io.Discard, nil)))
	removeTopic := func(version byte) []byte {
		b := []byte{0xA7, 1, 1, 18, byte(metadata.TypeRemoveTopic), version}
		return append(b, make([]byte, 16)...)
	}
	if err, _ := f.Apply(&raft.Log{Index: 1, Data: removeTopic(0)[:10]}).(error); err == nil {
		t.Fatal("a truncated batch applied without an error")
	}
	defer func() {
		msg, _ := recover().(string)
		if !strings.Contains(msg, "entry 2") || !strings.Contains(msg, "newer Strata") {
			t.Fatalf("applying a record of a newer version: panic %q, want one naming entry 2", msg)
		}
	}()
	f.Apply(&raft.Log{Index: 2, Data: removeTopic(1)})
}
