package admin

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// OffsetKind says how an OffsetSpec picks an offset.
type OffsetKind int

const (
	OffsetEarliest OffsetKind = iota // the log start offset
	OffsetLatest                     // the end (high-water mark): only new records
	OffsetExact                      // a given offset
	OffsetTime                       // the first record at or after a time
)

// OffsetSpec is where to start reading (consume --from) or where to move a group
// (group reset-offsets --to, an HTTP seek, the console's reset). Forms:
//
//	earliest | latest
//	N                      an offset (N < 10^12)
//	RFC3339 time           2024-05-01T12:00:00Z
//	@MS, or N >= 10^12     unix milliseconds (13+ digits are read as a time: no
//	                       partition holds 10^12 records, every time since 2001 is
//	                       that large)
type OffsetSpec struct {
	Kind   OffsetKind
	Offset int64 // OffsetExact
	Millis int64 // OffsetTime
}

// millisThreshold splits plain numbers into offsets (below) and unix milliseconds.
const millisThreshold = 1_000_000_000_000

// ParseOffsetSpec parses one of the forms above.
func ParseOffsetSpec(s string) (OffsetSpec, error) {
	switch s {
	case "earliest":
		return OffsetSpec{Kind: OffsetEarliest}, nil
	case "latest":
		return OffsetSpec{Kind: OffsetLatest}, nil
	}
	if ms, ok := strings.CutPrefix(s, "@"); ok {
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil || n < 0 {
			return OffsetSpec{}, fmt.Errorf("%q: expected @ followed by unix milliseconds", s)
		}
		return OffsetSpec{Kind: OffsetTime, Millis: n}, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		switch {
		case n < 0:
			return OffsetSpec{}, fmt.Errorf("%q: offsets are not negative", s)
		case n >= millisThreshold:
			return OffsetSpec{Kind: OffsetTime, Millis: n}, nil
		}
		return OffsetSpec{Kind: OffsetExact, Offset: n}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		if t.UnixMilli() < 0 {
			return OffsetSpec{}, fmt.Errorf("%q is before 1970", s)
		}
		return OffsetSpec{Kind: OffsetTime, Millis: t.UnixMilli()}, nil
	}
	return OffsetSpec{}, fmt.Errorf("%q is not earliest, latest, an offset, an RFC3339 time or unix milliseconds", s)
}

func (s OffsetSpec) String() string {
	switch s.Kind {
	case OffsetEarliest:
		return "earliest"
	case OffsetLatest:
		return "latest"
	case OffsetExact:
		return strconv.FormatInt(s.Offset, 10)
	}
	return time.UnixMilli(s.Millis).UTC().Format(time.RFC3339Nano)
}

// Bounds are the readable range of one partition: [Start, End), End being the
// high-water mark.
type Bounds struct{ Start, End int64 }

// ListBounds returns the bounds of the given partitions of topic, or of every
// partition when none are given. A partition no leader answered for is an error
// wrapping kerr.LeaderNotAvailable.
func ListBounds(ctx context.Context, adm *kadm.Client, topic string, partitions ...int32) (map[int32]Bounds, error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	if len(partitions) == 0 {
		for p := range starts[topic] {
			partitions = append(partitions, p)
		}
		if len(partitions) == 0 {
			return nil, fmt.Errorf("topic %q: no partitions listed", topic)
		}
	}
	out := make(map[int32]Bounds, len(partitions))
	for _, p := range partitions {
		s, okStart := starts[topic][p]
		e, okEnd := ends[topic][p]
		switch {
		case !okStart || !okEnd:
			return nil, topicError(topic, p, fmt.Errorf("%w: no leader answered", kerr.LeaderNotAvailable))
		case s.Err != nil:
			return nil, topicError(topic, p, s.Err)
		case e.Err != nil:
			return nil, topicError(topic, p, e.Err)
		}
		out[p] = Bounds{Start: s.Offset, End: e.Offset}
	}
	return out, nil
}

// topicError names the topic (and partition, if one) an error is about.
func topicError(topic string, p int32, err error) error {
	if p < 0 {
		return fmt.Errorf("topic %q: %w", topic, err)
	}
	return fmt.Errorf("topic %q partition %d: %w", topic, p, err)
}

// Resolve returns, for every partition in bounds, the offset s names, kept within
// [Start, End]. A time after the last record resolves to End.
func (s OffsetSpec) Resolve(ctx context.Context, adm *kadm.Client, topic string, bounds map[int32]Bounds) (map[int32]int64, error) {
	out := make(map[int32]int64, len(bounds))
	var byTime map[int32]kadm.ListedOffset
	if s.Kind == OffsetTime {
		listed, err := adm.ListOffsetsAfterMilli(ctx, s.Millis, topic)
		if err != nil {
			return nil, err
		}
		byTime = listed[topic]
	}
	for p, b := range bounds {
		var o int64
		switch s.Kind {
		case OffsetEarliest:
			o = b.Start
		case OffsetLatest:
			o = b.End
		case OffsetExact:
			o = s.Offset
		case OffsetTime:
			l, ok := byTime[p]
			switch {
			case !ok:
				return nil, topicError(topic, p, fmt.Errorf("%w: no leader answered for the time", kerr.LeaderNotAvailable))
			case l.Err != nil:
				return nil, topicError(topic, p, l.Err)
			case l.Offset < 0:
				o = b.End
			default:
				o = l.Offset
			}
		}
		out[p] = min(max(o, b.Start), b.End)
	}
	return out, nil
}
