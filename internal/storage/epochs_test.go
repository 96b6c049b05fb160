package storage

import (
	"slices"
	"testing"
)

func equalEpochs(a, b []EpochEntry) bool { return slices.Equal(a, b) }

func TestEpochCacheAssign(t *testing.T) {
	tests := []struct {
		name    string
		start   []EpochEntry
		epoch   int32
		offset  int64
		want    []EpochEntry
		changed bool
	}{
		{"first", nil, 1, 0, []EpochEntry{{1, 0}}, true},
		{"newer epoch", []EpochEntry{{1, 0}}, 2, 10, []EpochEntry{{1, 0}, {2, 10}}, true},
		{"same epoch later offset", []EpochEntry{{1, 0}}, 1, 5, []EpochEntry{{1, 0}}, false},
		{"same epoch earlier offset", []EpochEntry{{1, 0}, {2, 10}}, 2, 8, []EpochEntry{{1, 0}, {2, 8}}, true},
		{"older epoch drops newer", []EpochEntry{{1, 0}, {3, 10}}, 2, 12, []EpochEntry{{1, 0}, {2, 12}}, true},
		{"earlier offset drops later", []EpochEntry{{1, 0}, {2, 10}}, 5, 10, []EpochEntry{{1, 0}, {5, 10}}, true},
		{"negative epoch ignored", []EpochEntry{{1, 0}}, -1, 10, []EpochEntry{{1, 0}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := epochCache{entries: slices.Clone(tt.start)}
			if changed := c.assign(tt.epoch, tt.offset); changed != tt.changed || !equalEpochs(c.entries, tt.want) {
				t.Fatalf("assign -> %v %v, want %v %v", c.entries, changed, tt.want, tt.changed)
			}
		})
	}
}

func TestEpochCacheEndOffsetFor(t *testing.T) {
	c := epochCache{entries: []EpochEntry{{2, 10}, {4, 25}, {7, 40}}}
	const leo = 55
	tests := []struct {
		requested int32
		epoch     int32
		end       int64
	}{
		{UndefinedEpoch, UndefinedEpoch, UndefinedOffset},
		{7, 7, leo}, // latest: the log end
		{8, -1, -1}, // above every known epoch
		{4, 4, 40},  // known: start of the next
		{5, 4, 40},  // unknown, between: the floor epoch
		{3, 2, 25},  // unknown, between
		{2, 2, 25},  // first known
		{1, 1, 10},  // below every known: start of the first
		{0, 0, 10},
	}
	for _, tt := range tests {
		if e, off := c.endOffsetFor(tt.requested, leo); e != tt.epoch || off != tt.end {
			t.Errorf("endOffsetFor(%d) = (%d, %d), want (%d, %d)", tt.requested, e, off, tt.epoch, tt.end)
		}
	}
	var empty epochCache
	if e, off := empty.endOffsetFor(3, leo); e != UndefinedEpoch || off != UndefinedOffset {
		t.Errorf("empty cache: (%d, %d)", e, off)
	}
}

func TestEpochCacheTruncate(t *testing.T) {
	base := []EpochEntry{{1, 0}, {2, 10}, {4, 25}}
	tests := []struct {
		name string
		f    func(c *epochCache) bool
		want []EpochEntry
		chg  bool
	}{
		{"end above all", func(c *epochCache) bool { return c.truncateFromEnd(30) }, base, false},
		{"end at start of last", func(c *epochCache) bool { return c.truncateFromEnd(25) }, base[:2], true},
		{"end inside", func(c *epochCache) bool { return c.truncateFromEnd(11) }, base[:2], true},
		{"end everything", func(c *epochCache) bool { return c.truncateFromEnd(0) }, []EpochEntry{}, true},
		{"start below first", func(c *epochCache) bool { return c.truncateFromStart(0) }, base, false},
		{"start inside first", func(c *epochCache) bool { return c.truncateFromStart(5) }, []EpochEntry{{1, 5}, {2, 10}, {4, 25}}, true},
		{"start at second", func(c *epochCache) bool { return c.truncateFromStart(10) }, []EpochEntry{{2, 10}, {4, 25}}, true},
		{"start past last", func(c *epochCache) bool { return c.truncateFromStart(30) }, []EpochEntry{{4, 30}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := epochCache{entries: slices.Clone(base)}
			if chg := tt.f(&c); chg != tt.chg || !equalEpochs(c.entries, tt.want) {
				t.Fatalf("got %v %v, want %v %v", c.entries, chg, tt.want, tt.chg)
			}
		})
	}
}

func TestEpochCheckpointEncoding(t *testing.T) {
	entries := []EpochEntry{{1, 0}, {3, 100}, {9, 1 << 40}}
	got, err := decodeEpochs(encodeEpochs(entries))
	if err != nil || !equalEpochs(got, entries) {
		t.Fatalf("round trip: %v %v", got, err)
	}
	bad := [][]byte{
		nil,
		{0, 0, 0, 2, 0},
		encodeEpochs([]EpochEntry{{3, 100}, {1, 200}}),
		encodeEpochs([]EpochEntry{{1, 100}, {2, 100}}),
		encodeEpochs([]EpochEntry{{-1, 0}}),
	}
	for i, b := range bad {
		if _, err := decodeEpochs(b); err == nil {
			t.Errorf("case %d decoded", i)
		}
	}
}
