package txn

import (
	"regexp"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Described is one transactional id as DescribeTransactions and ListTransactions
// show it.
type Described struct {
	TransactionalID string
	Meta
}

// Describe returns id's state, or NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS or TRANSACTIONAL_ID_NOT_FOUND (INVALID_REQUEST
// for the empty id, as Kafka answers it).
func (c *Coordinator) Describe(id string) (Described, int16) {
	if id == "" {
		return Described{}, kerr.InvalidRequest.Code
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, pt, ke := c.loadedLocked(id)
	if ke != nil {
		return Described{}, ke.Code
	}
	e := pt.txns[id]
	if e == nil || !e.exists {
		return Described{}, kerr.TransactionalIDNotFound.Code
	}
	return Described{TransactionalID: id, Meta: e.meta}, 0
}

// ListFilter selects transactions for ListTransactions; empty or nil fields
// select all.
type ListFilter struct {
	States      []State
	ProducerIDs []int64
	// MinRunningMs, when >= 0, keeps only ids whose transaction started more
	// than that long before NowMs, in any state, as Kafka compares it: an id
	// without a start (StartMs -1) is kept.
	MinRunningMs int64
	NowMs        int64
	IDPattern    *regexp.Regexp
}

// List returns the transactional ids of every partition led here that match
// f, sorted by id; COORDINATOR_LOAD_IN_PROGRESS while one is being loaded, as
// Kafka answers it.
func (c *Coordinator) List(f ListFilter) ([]Described, int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Described
	for _, pt := range c.parts {
		if !pt.loaded {
			return nil, kerr.CoordinatorLoadInProgress.Code
		}
		for id, e := range pt.txns {
			if !e.exists || !f.match(id, e.meta) {
				continue
			}
			out = append(out, Described{TransactionalID: id, Meta: e.meta})
		}
	}
	slices.SortFunc(out, func(a, b Described) int { return strings.Compare(a.TransactionalID, b.TransactionalID) })
	return out, 0
}

func (f ListFilter) match(id string, m Meta) bool {
	if len(f.States) > 0 && !slices.Contains(f.States, m.State) {
		return false
	}
	if len(f.ProducerIDs) > 0 && !slices.Contains(f.ProducerIDs, m.ProducerID) {
		return false
	}
	if f.MinRunningMs >= 0 && f.NowMs-m.StartMs <= f.MinRunningMs {
		return false
	}
	return f.IDPattern == nil || f.IDPattern.MatchString(id)
}
