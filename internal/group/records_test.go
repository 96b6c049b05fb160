package group

import (
	"context"
	"errors"
	"iter"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/wait"
)

func TestOffsetRecordRoundTrip(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123)
	tests := []struct {
		name    string
		o       offsetCommit
		version int16
	}{
		{"plain", offsetCommit{offset: 42, leaderEpoch: -1, commitTime: at}, 3},
		{"epoch and metadata", offsetCommit{offset: 7, leaderEpoch: 5, metadata: "m", commitTime: at}, 3},
		{"expire time", offsetCommit{offset: 1, leaderEpoch: -1, commitTime: at, expireTime: at.Add(time.Hour)}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp := topicPartition{"topic", 3}
			k, err := decodeKey(offsetKey("grp", tp))
			if err != nil || k.kind != kindOffset || k.group != "grp" || k.tp != tp {
				t.Fatalf("key = %+v, %v", k, err)
			}
			b := offsetValue(tt.o)
			if v := int16(b[0])<<8 | int16(b[1]); v != tt.version {
				t.Fatalf("value version %d, want %d", v, tt.version)
			}
			got, err := decodeOffsetValue(b)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.o
			if tt.version == 1 {
				want.leaderEpoch = -1 // v1 has no epoch
			}
			if got.offset != want.offset || got.leaderEpoch != want.leaderEpoch || got.metadata != want.metadata ||
				!got.commitTime.Equal(want.commitTime) || !got.expireTime.Equal(want.expireTime) {
				t.Fatalf("decoded %+v, want %+v", got, want)
			}
		})
	}
}

func TestDecodeKey(t *testing.T) {
	gk := groupKey("g")
	ok3 := kmsg.OffsetCommitKey{Version: 0, Group: "g", Topic: "t", Partition: 1}
	tests := []struct {
		name    string
		key     []byte
		kind    recordKind
		corrupt bool
	}{
		{"group", gk, kindGroup, false},
		{"offset v0", ok3.AppendTo(nil), kindOffset, false},
		{"unknown version", []byte{0, 4, 1, 2}, kindUnknown, false}, // Kafka's ConsumerGroupPartitionMetadata: skipped
		{"negative version", []byte{0xff, 0xff}, kindUnknown, false},
		{"empty", nil, 0, true},
		{"one byte", []byte{0}, 0, true},
		{"truncated group key", gk[:len(gk)-1], 0, true},
		{"trailing bytes ignored, as Kafka's reader does", append(groupKey("g"), 0), kindGroup, false},
		{"truncated offset key", ok3.AppendTo(nil)[:6], 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := decodeKey(tt.key)
			if tt.corrupt {
				if !errors.Is(err, ErrCorruptRecord) {
					t.Fatalf("err = %v, want ErrCorruptRecord", err)
				}
				return
			}
			if err != nil || k.kind != tt.kind {
				t.Fatalf("kind %d err %v, want kind %d", k.kind, err, tt.kind)
			}
		})
	}
}

func TestReplay(t *testing.T) {
	tp := func(p int32) topicPartition { return topicPartition{"t", p} }
	off := func(g string, p int32, o int64) Record {
		return Record{Key: offsetKey(g, tp(p)), Value: offsetValue(offsetCommit{offset: o, commitTime: time.UnixMilli(1)})}
	}
	meta := func(g string, gen int32) Record {
		v := kmsg.NewGroupMetadataValue()
		v.Version, v.ProtocolType, v.Generation = 3, "consumer", gen
		return Record{Key: groupKey(g), Value: v.AppendTo(nil)}
	}
	r := newReplayed()
	recs := []Record{
		off("a", 0, 1), off("a", 1, 2), off("a", 0, 3), // latest wins
		{Key: offsetKey("a", tp(1))},                 // tombstone
		off("b", 0, 9), {Key: offsetKey("b", tp(0))}, // b's only offset deleted
		meta("a", 1), meta("a", 2),
		meta("c", 1), {Key: groupKey("c")}, // c deleted
		{Key: []byte{0, 9, 1}, Value: []byte("future record")},
		{Key: offsetKey("z", tp(0))}, // tombstone of nothing
	}
	for _, rec := range recs {
		if err := r.apply(rec); err != nil {
			t.Fatal(err)
		}
	}
	if len(r.offsets) != 1 || len(r.offsets["a"]) != 1 || r.offsets["a"][tp(0)].offset != 3 {
		t.Fatalf("offsets = %+v", r.offsets)
	}
	if len(r.groups) != 1 || r.groups["a"].Generation != 2 {
		t.Fatalf("groups = %+v", r.groups)
	}
	if r.skipped != 1 {
		t.Fatalf("skipped = %d", r.skipped)
	}

	for name, bad := range map[string]Record{
		"empty offset value":     {Key: offsetKey("a", tp(0)), Value: []byte{}},
		"offset value v9":        {Key: offsetKey("a", tp(0)), Value: []byte{0, 9, 0, 0}},
		"truncated offset value": {Key: offsetKey("a", tp(0)), Value: offsetValue(offsetCommit{})[:5]},
		"group value garbage":    {Key: groupKey("a"), Value: []byte{0, 3, 0xff, 0xff, 0xff}},
		"group value negative":   {Key: groupKey("a"), Value: []byte{0x80, 0}},
	} {
		if err := newReplayed().apply(bad); !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("%s: err = %v, want ErrCorruptRecord", name, err)
		}
	}
}

// FuzzReplay feeds arbitrary records to replay: bad input must be an error, never a
// panic.
func FuzzReplay(f *testing.F) {
	f.Add(offsetKey("g", topicPartition{"t", 0}), offsetValue(offsetCommit{offset: 1}))
	f.Add(groupKey("g"), (&kmsg.GroupMetadataValue{Version: 3, Members: []kmsg.GroupMetadataValueMember{{MemberID: "m"}}}).AppendTo(nil))
	f.Add(groupKey("g"), []byte(nil))
	f.Add([]byte{0, 2}, []byte{0, 4, 1})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		_ = newReplayed().apply(Record{Key: key, Value: value})
	})
}

// blockingRecords yields recs and then waits for release before finishing.
func blockingRecords(recs []Record, release <-chan struct{}) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
		<-release
	}
}

func TestLoadPartition(t *testing.T) {
	ctx := context.Background()
	cfg := DefaultConfig()
	c := New(cfg, newMemStore(), nil)
	defer c.Close()
	p := PartitionFor("g", 50)

	fetchCode := func() int16 {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.Group = 7, "g"
		return c.OffsetFetch(ctx, req).ErrorCode
	}
	if code := fetchCode(); code != kerr.NotCoordinator.Code {
		t.Fatalf("before load: %v", kerr.ErrorForCode(code))
	}
	if err := c.LoadPartitionAt(ctx, 50, 0, newMemStore().records(0)); err == nil {
		t.Fatal("partition 50 of 50 loaded")
	}
	if err := c.LoadPartitionAt(ctx, -1, 0, newMemStore().records(0)); err == nil {
		t.Fatal("partition -1 loaded")
	}

	// While loading: COORDINATOR_LOAD_IN_PROGRESS, and ListGroups says so too.
	release := make(chan struct{})
	loaded := make(chan error)
	go func() {
		loaded <- c.LoadPartitionAt(ctx, p, 0, blockingRecords([]Record{{
			Key: offsetKey("g", topicPartition{"t", 0}), Value: offsetValue(offsetCommit{offset: 5}),
		}}, release))
	}()
	wait.For(t, "the condition", func() bool { return fetchCode() == kerr.CoordinatorLoadInProgress.Code })
	if r := c.ListGroups(ctx, kmsg.NewPtrListGroupsRequest()); r.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("list while loading: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if _, err := c.CommittedOffsets("g"); !errors.Is(err, ErrLoadInProgress) {
		t.Fatalf("CommittedOffsets while loading: %v", err)
	}
	// As Kafka: heartbeats are answered blindly, syncs are sent back to rejoin.
	if r := c.Heartbeat(ctx, &kmsg.HeartbeatRequest{Group: "g", MemberID: "m"}); r.ErrorCode != 0 {
		t.Fatalf("heartbeat while loading: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := c.SyncGroup(ctx, &kmsg.SyncGroupRequest{Group: "g", MemberID: "m"}); r.ErrorCode != kerr.RebalanceInProgress.Code {
		t.Fatalf("sync while loading: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	jr := kmsg.NewPtrJoinGroupRequest()
	jr.Group, jr.SessionTimeoutMillis = "g", 10000
	if r := c.JoinGroup(ctx, jr); r.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("join while loading: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if err := c.LoadPartitionAt(ctx, p, 0, newMemStore().records(0)); !errors.Is(err, ErrAlreadyLoaded) {
		t.Fatalf("second load: %v", err)
	}
	close(release)
	if err := <-loaded; err != nil {
		t.Fatal(err)
	}
	if offs, err := c.CommittedOffsets("g"); err != nil || len(offs) != 1 || offs[0].Offset != 5 {
		t.Fatalf("after load: %+v %v", offs, err)
	}

	// Unloaded while loading: the load reports it and the partition stays unowned.
	c.UnloadPartition(p)
	release = make(chan struct{})
	go func() { loaded <- c.LoadPartitionAt(ctx, p, 0, blockingRecords(nil, release)) }()
	wait.For(t, "the condition", func() bool { return fetchCode() == kerr.CoordinatorLoadInProgress.Code })
	c.UnloadPartition(p)
	close(release)
	if err := <-loaded; !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("load unloaded midway: %v", err)
	}
	if code := fetchCode(); code != kerr.NotCoordinator.Code {
		t.Fatalf("after aborted load: %v", kerr.ErrorForCode(code))
	}

	// A read error or a corrupt record fails the load and leaves the partition unowned.
	readErr := errors.New("segment unreadable")
	failing := func(yield func(Record, error) bool) { yield(Record{}, readErr) }
	if err := c.LoadPartitionAt(ctx, p, 0, failing); !errors.Is(err, readErr) {
		t.Fatalf("load with read error: %v", err)
	}
	corrupt := newMemStore()
	_, _ = corrupt.Append(ctx, p, 0, []Record{{Key: groupKey("g"), Value: []byte{0, 3, 1}}})
	if err := c.LoadPartitionAt(ctx, p, 0, corrupt.records(p)); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("load with corrupt record: %v", err)
	}
	if code := fetchCode(); code != kerr.NotCoordinator.Code {
		t.Fatalf("after failed load: %v", kerr.ErrorForCode(code))
	}
	// A cancelled context aborts the load.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.LoadPartitionAt(cctx, p, 0, newMemStore().records(0)); !errors.Is(err, context.Canceled) {
		t.Fatalf("load with cancelled context: %v", err)
	}
}
