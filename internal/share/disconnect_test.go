package share

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-stream/strata/internal/wait"
)

// acquiredBy opens member's session on connection conn and returns how many
// records it acquired.
func acquiredBy(t *testing.T, m *Manager, member string, conn uint64) int {
	t.Helper()
	resp := m.ShareFetch(WithConnection(context.Background(), conn), openFetch(member))
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("%s: share fetch: %+v", member, resp)
	}
	return len(resp.Topics[0].Partitions[0].AcquiredRecords)
}

// TestConnectionClosedEndsItsSessions: closing the connection a share session
// was opened on ends the session and releases its member's records (Kafka
// 4.1+, KAFKA-19015); a session its member opened again on another connection
// belongs to that one (KAFKA-19950), so the old connection's close leaves it.
func TestConnectionClosedEndsItsSessions(t *testing.T) {
	m, _ := newGroupCommitManager(t, &memStore{}, 1)
	if n := acquiredBy(t, m, "a", 1); n != 1 {
		t.Fatalf("a acquired %d records, want 1", n)
	}
	acquiredBy(t, m, "a", 2) // a's session again, on a new connection
	m.ConnectionClosed(1)
	m.ConnectionClosed(3) // no session's
	m.background.Wait()
	if n := acquiredBy(t, m, "b", 4); n != 0 {
		t.Fatalf("b acquired %d records while a's session on connection 2 holds them", n)
	}
	m.ConnectionClosed(2)
	wait.For(t, "a's record to be released", func() bool { return acquiredBy(t, m, "c", 5) == 1 })
	next := openFetch("a")
	next.ShareSessionEpoch = 1
	if resp := m.ShareFetch(context.Background(), next); resp.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Errorf("a's next fetch after its connection closed: code %d, want SHARE_SESSION_NOT_FOUND", resp.ErrorCode)
	}
}
