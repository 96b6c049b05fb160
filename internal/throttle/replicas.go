package throttle

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Replicas is a parsed throttled-replicas list: a topic's
// leader.replication.throttled.replicas or follower.replication.throttled.replicas.
// A nil *Replicas lists nothing. It is immutable once parsed.
type Replicas struct {
	all bool
	set map[replica]struct{}
}

type replica struct{ partition, broker int32 }

// ErrInvalidReplicas: the value is neither "*" nor a list of partition:broker.
var ErrInvalidReplicas = errors.New(`want "*" or a comma-separated list of partition:broker`)

// ParseReplicas parses a list value as Kafka's ThrottledReplicaListValidator
// accepts it: "*" (every replica), or comma-separated "partition:broker" items
// (blank items are skipped). An empty value lists nothing (nil).
func ParseReplicas(v string) (*Replicas, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, nil
	}
	if v == "*" {
		return &Replicas{all: true}, nil
	}
	r := &Replicas{set: map[replica]struct{}{}}
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		ps, bs, ok := strings.Cut(item, ":")
		p, perr := strconv.ParseInt(ps, 10, 32)
		b, berr := strconv.ParseInt(bs, 10, 32)
		if !ok || perr != nil || berr != nil || p < 0 || b < 0 || !digits(ps) || !digits(bs) {
			return nil, fmt.Errorf("%w: %q", ErrInvalidReplicas, item)
		}
		r.set[replica{int32(p), int32(b)}] = struct{}{}
	}
	if len(r.set) == 0 {
		return nil, nil
	}
	return r, nil
}

func digits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// Has reports whether the list names the replica of partition on broker.
func (r *Replicas) Has(partition, broker int32) bool {
	if r == nil {
		return false
	}
	if r.all {
		return true
	}
	_, ok := r.set[replica{partition, broker}]
	return ok
}
