package chaos

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Kind is a kind of fault.
type Kind string

// The faults the harness injects. The first six hit a multi-process cluster;
// the disk faults and the power loss an in-process one (they need the vfs).
const (
	Kill           Kind = "kill"            // SIGKILL a node, restart it after the hold
	Pause          Kind = "pause"           // SIGSTOP a node for the hold, then SIGCONT
	RollingRestart Kind = "rolling-restart" // SIGTERM every node in turn, restarting each
	Partition      Kind = "partition"       // cut every link to and from a node for the hold
	PartitionPeers Kind = "partition-peers" // cut a node off from the other nodes, not from clients
	DataCut        Kind = "data-cut"        // cut the data link between a partition's follower and its leader
	DiskFull       Kind = "disk-full"       // a node's writes fail with ENOSPC for the hold
	FsyncFailure   Kind = "fsync-failure"   // a node's fsyncs fail with EIO for the hold
	PowerLoss      Kind = "power-loss"      // every node loses what it had not fsynced, at once
)

// ProcessKinds are the faults of a multi-process run.
var ProcessKinds = []Kind{Kill, Pause, RollingRestart, Partition, PartitionPeers, DataCut}

// Role picks a fault's node by what it does when the fault starts.
type Role string

const (
	Leader     Role = "leader"     // the leader of the fault's partition
	Follower   Role = "follower"   // a follower of the fault's partition
	Controller Role = "controller" // the active controller
	Any        Role = "any"        // the fault's node index, whatever it does
	// Coordinator is the transaction coordinator of a transactional run's
	// producers: the leader of their __transaction_state partition.
	Coordinator Role = "txn-coordinator"
	// ShareCoordinator is the coordinator of a share run's share group (the
	// leader of its __consumer_offsets partition), which keeps the group's
	// membership in memory only: hitting it moves the group.
	ShareCoordinator Role = "share-coordinator"
	// ShareState is the share coordinator of the fault's partition for a share
	// run's group: the leader of the __share_group_state partition that saves
	// that share partition's state, so every acknowledgement waits on it.
	ShareState Role = "share-state"
)

// Fault is one step of a schedule, before its node is resolved.
type Fault struct {
	Kind      Kind
	Role      Role
	Partition int32 // Leader and Follower: whose leader or follower
	Pick      int   // Follower and Any: which one, modulo the candidates
	// Gap is the quiet time before the fault; Hold how long it lasts.
	Gap, Hold time.Duration
	// Reset (Partition): on healing, close connections the cut stalled instead
	// of letting them deliver what they held.
	Reset bool
}

func (f Fault) String() string {
	s := fmt.Sprintf("%s of the %s", f.Kind, f.Role)
	switch f.Role {
	case Leader, Follower:
		s += fmt.Sprintf(" of partition %d", f.Partition)
	case Coordinator:
		s = fmt.Sprintf("%s of the transaction coordinator", f.Kind)
	case ShareCoordinator:
		s = fmt.Sprintf("%s of the share group's coordinator", f.Kind)
	case ShareState:
		s = fmt.Sprintf("%s of the share coordinator of partition %d", f.Kind, f.Partition)
	case Any:
		s = fmt.Sprintf("%s of node pick %d", f.Kind, f.Pick)
	}
	switch f.Kind {
	case RollingRestart, Decommission, VoterChange:
		s = string(f.Kind)
	case Reassign, ReassignCancel, ReassignKill:
		s = fmt.Sprintf("%s of partition %d", f.Kind, f.Partition)
	case OpPause, OpCut:
		op, fault := overlapped(f), f
		op.Hold, fault.Kind = 0, Pause
		if f.Kind == OpCut {
			fault.Kind = Partition
		}
		return fmt.Sprintf("%s during a %s", op, fault)
	case OpKill:
		op := overlapped(f)
		op.Hold = 0
		return fmt.Sprintf("%s with the node it works on killed half-way for %v", op, f.Hold.Round(time.Millisecond))
	}
	if f.Hold > 0 && f.Kind != RollingRestart && f.Kind != PowerLoss {
		s += fmt.Sprintf(" for %v", f.Hold.Round(time.Millisecond))
	}
	if f.Kind == Partition || f.Kind == PartitionPeers || f.Kind == DataCut {
		if f.Reset {
			s += ", stalled connections reset on heal"
		} else {
			s += ", stalled connections resumed on heal"
		}
	}
	return s
}

// Schedule draws faults from a seeded generator: the same seed, kinds and
// partition count give the same faults in the same order.
type Schedule struct {
	rng        *rand.Rand
	kinds      []Kind
	partitions int32
	extra      []Role // roles beyond the usual ones (WithRoles)
}

// Hold and gap bounds. Holds straddle the test clusters' 2s broker session
// timeout and replica lag limit, so some faults fence a node and shrink ISRs
// and some end before anything notices.
const (
	minHold = 500 * time.Millisecond
	maxHold = 6 * time.Second
	minGap  = 200 * time.Millisecond
	maxGap  = 2 * time.Second
)

// NewSchedule returns the schedule of seed over kinds, for a topic of the
// given partition count.
func NewSchedule(seed uint64, kinds []Kind, partitions int32) *Schedule {
	return &Schedule{rng: rand.New(rand.NewPCG(seed, 0x5eed)), kinds: kinds, partitions: partitions}
}

// WithRoles lets the schedule also pick roles (a transactional run's
// coordinator) for the faults that hit one node. Without extra roles a seed
// draws the schedule it always did.
func (s *Schedule) WithRoles(roles ...Role) *Schedule {
	s.extra = roles
	return s
}

// Next returns the next fault.
func (s *Schedule) Next() Fault {
	f := Fault{
		Kind:      s.kinds[s.rng.IntN(len(s.kinds))],
		Partition: s.rng.Int32N(s.partitions),
		Pick:      s.rng.IntN(1 << 16),
		Gap:       between(s.rng, minGap, maxGap),
		Hold:      between(s.rng, minHold, maxHold),
		Reset:     s.rng.IntN(2) == 0,
	}
	roles := append([]Role{Leader, Leader, Follower, Controller, Any}, s.extra...)
	if f.Kind == DiskFull || f.Kind == FsyncFailure {
		roles = append([]Role{Leader, Follower, Any}, s.extra...)
	}
	f.Role = roles[s.rng.IntN(len(roles))]
	switch f.Kind {
	case RollingRestart, PowerLoss:
		f.Role = Any // every node
	case DataCut:
		f.Role = Follower // and its leader
	}
	return f
}

func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}
