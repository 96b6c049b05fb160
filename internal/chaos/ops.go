package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/admin"
	"github.com/strata-stream/strata/internal/cli"
	"github.com/strata-stream/strata/internal/testcluster"
)

// The operations a multi-process run with a broker-only node mixes with its
// faults (OpKinds). Each is done, waited for and checked before the next
// fault, as an operator would.
const (
	// Reassign moves one replica of the fault's partition to a broker that
	// holds none (AlterPartitionReassignments) and waits until it is done.
	Reassign Kind = "reassign"
	// ReassignCancel starts such a move and cancels it at once: the partition
	// ends on the old replicas or, if the move won the race, the new ones.
	ReassignCancel Kind = "reassign-cancel"
	// ReassignKill starts such a move and, while it is under way, SIGKILLs
	// the partition's leader or the broker the replica moves to (by the
	// fault's pick) for the hold, then waits until the move is done.
	ReassignKill Kind = "reassign-kill"
	// Decommission retires the broker-only node (`strata cluster decommission`:
	// its replicas move to the others, it is unregistered), stops it for the
	// hold, and starts it again: a broker removed and added back.
	Decommission Kind = "decommission"
	// VoterChange promotes the broker-only node to a controller voter
	// (AddRaftVoter), or demotes it again (RemoveRaftVoter).
	VoterChange Kind = "voter-change"
	// OpPause does an operation (a reassign, decommission or voter-change, by
	// the fault's pick) while a node picked by the fault's role (Any: the
	// broker-only node too) is SIGSTOPped: the pause starts, the operation is
	// asked for at once, the node is resumed after the hold, and the
	// operation is then waited for.
	OpPause Kind = "op-pause"
	// OpCut does the same with the node cut off (as Partition) for the hold.
	OpCut Kind = "op-cut"
	// OpKill starts an operation (a reassign, decommission or voter-change,
	// by the fault's pick) and, halfway through the hold, SIGKILLs the node
	// the operation works on: the broker a moved replica goes to, or the
	// broker-only node being decommissioned or promoted/demoted. The node is
	// restarted after the hold and the operation then waited for.
	OpKill Kind = "op-kill"
)

// OpKinds are the operations of a multi-process run with a broker-only node.
var OpKinds = []Kind{Reassign, ReassignCancel, Decommission, VoterChange, ReassignKill, OpPause, OpCut, OpKill}

// overlappedOps are the operations OpPause, OpCut and OpKill do during their
// fault.
var overlappedOps = []Kind{Reassign, Decommission, VoterChange}

// overlapped is the operation an OpPause, OpCut or OpKill fault f does: picked by
// f.Pick, on f's partition, with the rest of the pick for its own choices.
func overlapped(f Fault) Fault {
	op := f
	op.Kind = overlappedOps[f.Pick%len(overlappedOps)]
	op.Pick = f.Pick / len(overlappedOps)
	return op
}

// opTimeout bounds the wait for an operation to complete.
const opTimeout = healthyTimeout

// operate does op f on the cluster and says what it did.
func (c *processCluster) operate(f Fault) (string, error) {
	if c.spare == nil {
		return "", fmt.Errorf("%s needs a broker-only node", f.Kind)
	}
	switch f.Kind {
	case Reassign, ReassignCancel, ReassignKill:
		return c.reassign(f)
	case Decommission:
		return c.decommission(f)
	case VoterChange:
		return c.toggleVoter()
	case OpPause, OpCut:
		return c.overlap(f)
	case OpKill:
		return c.killMidway(f)
	}
	return "", fmt.Errorf("not an operation: %s", f.Kind)
}

// overlap does the operation of an OpPause or OpCut fault f while its node is
// paused or cut off. The fault is applied first and held on the test's
// goroutine (testcluster's lifecycle calls must run there) while the
// operation's requests and waits run on another; a decommissioned node is
// stopped and started again only after the heal.
func (c *processCluster) overlap(f Fault) (string, error) {
	op := overlapped(f)
	n, why, err := c.resolve(f)
	if err != nil {
		return "", err
	}
	fault := "paused"
	switch f.Kind {
	case OpPause:
		n.Pause()
	case OpCut:
		fault = "cut off"
		c.cn.net.Isolate(name(n.ID))
	}
	done := c.startOverlapped(op)
	time.Sleep(f.Hold) // the fault's length, the operation under way
	switch f.Kind {
	case OpPause:
		n.Resume()
	case OpCut:
		c.cn.net.Heal(f.Reset)
		if f.Reset {
			fault += " (stalled connections reset)"
		}
	}
	r := <-done
	during := fmt.Sprintf("node %d (%s) %s for %v as it started", n.ID, why, fault, f.Hold.Round(time.Millisecond))
	what, err := c.finishOverlapped(op, r, during)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s; during it %s", what, during), nil
}

// opResult is what an operation started by startOverlapped did.
type opResult struct {
	what string
	err  error
}

// startOverlapped starts the operation op of an OpPause, OpCut or OpKill
// fault on its own goroutine (without a decommissioned node's re-add, which
// needs the test's goroutine) and returns where its result comes.
func (c *processCluster) startOverlapped(op Fault) <-chan opResult {
	done := make(chan opResult, 1)
	go func() {
		var r opResult
		switch op.Kind {
		case Reassign:
			r.what, r.err = c.reassign(op)
		case Decommission:
			r.what, r.err = c.retire()
		case VoterChange:
			r.what, r.err = c.toggleVoter()
		}
		done <- r
	}()
	return done
}

// finishOverlapped ends an operation started by startOverlapped once its
// fault (during) is over: a decommissioned node is re-added.
func (c *processCluster) finishOverlapped(op Fault, r opResult, during string) (string, error) {
	if op.Kind == Decommission && isNoTarget(r.err) {
		// The fault fenced the broker a replica had to move to (four brokers,
		// three replicas): strata refuses rather than move onto it, and an
		// operator tries again once it is back.
		refused := r.err
		if err := waitFor(opTimeout, func() error {
			r.what, r.err = c.retire()
			if isNoTarget(r.err) {
				return r.err
			}
			return nil
		}); err != nil {
			r.err = err
		}
		if r.err == nil {
			r.what = fmt.Sprintf("refused while the fault lasted (%v); after it, %s", refused, r.what)
		}
	}
	if r.err != nil {
		return "", fmt.Errorf("%s, %s: %w", op.Kind, during, r.err)
	}
	if op.Kind == Decommission {
		if r.what, r.err = c.readd(r.what, op.Hold); r.err != nil {
			return "", fmt.Errorf("%s, %s: %w", op.Kind, during, r.err)
		}
	}
	return r.what, nil
}

// isNoTarget reports whether err is `strata cluster decommission` refusing
// because a replica has no running broker to move to.
func isNoTarget(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no broker left to take")
}

// killMidway does the operation of an OpKill fault f on another goroutine
// and, as soon as it is seen under way (within half the hold), SIGKILLs the
// node it works on for the hold (lifecycle calls stay on the test's
// goroutine), then waits for it.
func (c *processCluster) killMidway(f Fault) (string, error) {
	op := overlapped(f)
	done := c.startOverlapped(op)
	var r opResult
	ended := false
	var victim *testcluster.Node
	why := ""
	tick := time.NewTicker(midwayPoll)
	defer tick.Stop()
	giveUp := time.After(f.Hold / 2)
watch:
	for victim == nil {
		select {
		case r = <-done:
			ended = true
			break watch
		case <-giveUp:
			break watch
		case <-tick.C:
		}
		victim, why = c.midway(op)
	}
	if victim == nil && op.Kind != Reassign {
		victim, why = c.spare, "the broker-only node it works on"
	}
	during := "no node killed: the move was done before it was seen under way"
	if victim != nil {
		victim.Kill()
		time.Sleep(f.Hold)
		victim.Restart()
		when := "while it was under way"
		if ended {
			when = "after it ended"
		}
		during = fmt.Sprintf("node %d (%s) killed %s, for %v", victim.ID, why, when, f.Hold.Round(time.Millisecond))
	}
	if !ended {
		r = <-done
	}
	what, err := c.finishOverlapped(op, r, during)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s; %s", what, during), nil
}

// midwayPoll is how often killMidway looks for its operation under way.
const midwayPoll = 10 * time.Millisecond

// midway returns the node an operation under way works on, or nil while it
// is not seen under way: for a reassign, the broker the replica moves to,
// once the move is listed; for a decommission, the broker-only node, once
// a move off it is listed; for a voter change, the broker-only node at once
// (its one request is in flight).
func (c *processCluster) midway(op Fault) (*testcluster.Node, string) {
	switch op.Kind {
	case Reassign:
		if adding, err := c.addingReplicas(op.Partition); err == nil && len(adding) > 0 {
			return c.tc.Node(adding[0]), "the broker the replica moves to"
		}
	case Decommission:
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req := kmsg.NewPtrListPartitionReassignmentsRequest() // no topics: every move
		if resp, err := req.RequestWith(ctx, c.cl); err == nil {
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if slices.Contains(p.RemovingReplicas, c.spare.ID) {
						return c.spare, "the broker-only node being decommissioned, its replicas moving off"
					}
				}
			}
		}
	case VoterChange:
		return c.spare, "the broker-only node whose voter change is in flight"
	}
	return nil, ""
}

// addingReplicas lists the replicas a move of the partition under way adds.
func (c *processCluster) addingReplicas(partition int32) ([]int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.adm.ListPartitionReassignments(ctx, kadm.TopicsSet{c.topic: {partition: struct{}{}}})
	if err != nil {
		return nil, err
	}
	return resp[c.topic][partition].AddingReplicas, nil
}

// reassign moves one replica of f's partition to a broker outside its replica
// set, cancelling the move at once for ReassignCancel, killing a node during
// it for ReassignKill.
func (c *processCluster) reassign(f Fault) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	st, err := c.tc.Partition(ctx, c.topic, f.Partition)
	if err != nil {
		return "", err
	}
	var outside []int32
	for _, n := range c.tc.Nodes() {
		if n.IsBroker() && !slices.Contains(st.Replicas, n.ID) {
			outside = append(outside, n.ID)
		}
	}
	if len(outside) == 0 {
		return "", fmt.Errorf("partition %d is on every broker: %v", f.Partition, st.Replicas)
	}
	to := slices.Clone(st.Replicas)
	moved := outside[f.Pick%len(outside)]
	to[(f.Pick/len(outside))%len(to)] = moved
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(c.topic, f.Partition, to)
	if err := alterAssignments(ctx, c.adm, req); err != nil {
		return "", fmt.Errorf("moving partition %d to %v: %w", f.Partition, to, err)
	}
	what := fmt.Sprintf("reassign partition %d from %v to %v", f.Partition, st.Replicas, to)
	if f.Kind == ReassignKill {
		victim, why := st.Leader, "its leader"
		if f.Pick%2 == 1 || victim < 1 {
			victim, why = moved, "the broker it moves to"
		}
		n := c.tc.Node(victim)
		n.Kill()
		time.Sleep(f.Hold)
		n.Restart()
		what += fmt.Sprintf(", node %d (%s) killed as it started, for %v", victim, why, f.Hold.Round(time.Millisecond))
	}
	if f.Kind == ReassignCancel {
		var cancelReq kadm.AlterPartitionAssignmentsReq
		cancelReq.CancelAssign(c.topic, f.Partition)
		err := alterAssignments(ctx, c.adm, cancelReq)
		switch {
		case errors.Is(err, kerr.NoReassignmentInProgress):
			what += ", cancelled too late"
		case err != nil:
			return "", fmt.Errorf("%s, cancelling: %w", what, err)
		default:
			what += ", cancelled"
		}
	}
	// Done once the controller lists no move and the metadata shows the target
	// (or, cancelled, the old replicas).
	sameSet := func(a, b []int32) bool {
		return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
	}
	var now []int32
	if err := waitFor(opTimeout, func() error {
		if err := c.reassignmentDone(f.Partition); err != nil {
			return err
		}
		cur, err := c.tc.Partition(ctx, c.topic, f.Partition)
		if err != nil {
			return err
		}
		now = cur.Replicas
		if sameSet(now, to) || f.Kind == ReassignCancel && sameSet(now, st.Replicas) {
			return nil
		}
		return fmt.Errorf("partition %d on %v", f.Partition, now)
	}); err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Sprintf("%s; now on %v", what, now), nil
}

// alterAssignments sends req and returns the first error, the request's or a
// partition's.
func alterAssignments(ctx context.Context, adm *kadm.Client, req kadm.AlterPartitionAssignmentsReq) error {
	resp, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return err
	}
	return resp.Error()
}

// reassignmentDone is nil once no reassignment of the partition is under way.
func (c *processCluster) reassignmentDone(partition int32) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.adm.ListPartitionReassignments(ctx, kadm.TopicsSet{c.topic: {partition: struct{}{}}})
	if err != nil {
		return err
	}
	if r, ok := resp[c.topic][partition]; ok && len(r.AddingReplicas)+len(r.RemovingReplicas) > 0 {
		return fmt.Errorf("partition %d still moving: adding %v, removing %v", partition, r.AddingReplicas, r.RemovingReplicas)
	}
	return nil
}

// decommission retires the broker-only node, stops it for the hold, restarts
// it and waits until it is registered again.
func (c *processCluster) decommission(f Fault) (string, error) {
	what, err := c.retire()
	if err != nil {
		return "", err
	}
	return c.readd(what, f.Hold)
}

// retire removes the broker-only node from the voters if it is one, then
// decommissions it with the strata CLI. Safe off the test's goroutine.
func (c *processCluster) retire() (string, error) {
	n := c.spare
	var what []string
	if c.spareVoter {
		if _, err := c.toggleVoter(); err != nil {
			return "", err
		}
		what = append(what, fmt.Sprintf("node %d removed from the voters", n.ID))
	}
	cmd := exec.Command(c.bin, "cluster", "decommission", fmt.Sprint(n.ID))
	cmd.Env = append(os.Environ(), cli.BrokersEnv+"="+strings.Join(c.seeds().addrs, ","))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("strata cluster decommission %d: %v: %s", n.ID, err, out)
	}
	what = append(what, fmt.Sprintf("node %d decommissioned (%s)", n.ID, strings.TrimSpace(lastLine(string(out)))))
	return strings.Join(what, "; "), nil
}

// readd stops the retired broker-only node for hold, restarts it and waits
// until it is registered again; what is what retired it.
func (c *processCluster) readd(what string, hold time.Duration) (string, error) {
	n := c.spare
	n.Stop()
	time.Sleep(hold) // the node stays away this long
	n.Restart()
	if err := waitFor(opTimeout, func() error { return c.registered(n.ID) }); err != nil {
		return "", fmt.Errorf("node %d back after its decommission: %w", n.ID, err)
	}
	return fmt.Sprintf("%s, stopped for %v, started and registered again", what, hold.Round(time.Millisecond)), nil
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// registered is nil once the metadata lists node id as a broker.
func (c *processCluster) registered(id int32) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	md, err := c.adm.BrokerMetadata(ctx)
	if err != nil {
		return err
	}
	for _, b := range md.Brokers {
		if b.NodeID == id {
			return nil
		}
	}
	return fmt.Errorf("node %d is not a registered broker", id)
}

// toggleVoter promotes the broker-only node to a voter, or demotes it, and
// waits until DescribeQuorum shows the change.
func (c *processCluster) toggleVoter() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	id := c.spare.ID
	var req kmsg.Request
	verb := "added to"
	if c.spareVoter {
		r, err := admin.RemoveVoterRequest(ctx, c.cl, id)
		if err != nil {
			return "", err
		}
		req, verb = r, "removed from"
	} else {
		// An active controller lists the node among the observers, where
		// the request's directory id is read, once it has heard from it in
		// its term (as Kafka's leader): a new one may not have yet.
		var r *kmsg.AddRaftVoterRequest
		err := waitFor(opTimeout, func() (err error) {
			r, err = admin.AddVoterRequest(ctx, c.cl, id, c.cn.advertisedController(id))
			return err
		})
		if err != nil {
			return "", err
		}
		req = r
	}
	send := func() (code int16, msg *string, err error) {
		resp, err := c.cl.Request(ctx, req)
		switch r := resp.(type) {
		case *kmsg.AddRaftVoterResponse:
			code, msg = r.ErrorCode, r.ErrorMessage
		case *kmsg.RemoveRaftVoterResponse:
			code, msg = r.ErrorCode, r.ErrorMessage
		}
		return code, msg, err
	}
	code, msg, err := send()
	// A retriable answer (a removal refused while too few of the voters it
	// would leave are reachable, a controller change) is asked again, as
	// Kafka's admin client would.
	for err == nil && kerr.IsRetriable(kerr.ErrorForCode(code)) && ctx.Err() == nil {
		time.Sleep(200 * time.Millisecond) // the retry backoff
		code, msg, err = send()
	}
	if err != nil {
		return "", err
	}
	// The client may have sent the request again (its first connection
	// ended with the node killed): the change is then in place already.
	if !c.spareVoter && code == kerr.DuplicateVoter.Code || c.spareVoter && code == kerr.VoterNotFound.Code {
		code = 0
	}
	if err := kerr.ErrorForCode(code); err != nil {
		if msg != nil {
			err = fmt.Errorf("%w (%s)", err, *msg)
		}
		return "", fmt.Errorf("node %d %s the voters: %w", id, verb, err)
	}
	want := !c.spareVoter
	if err := waitFor(opTimeout, func() error {
		voters, err := c.voters()
		if err != nil {
			return err
		}
		if slices.Contains(voters, id) != want {
			return fmt.Errorf("voters %v", voters)
		}
		return nil
	}); err != nil {
		return "", fmt.Errorf("node %d %s the voters: %w", id, verb, err)
	}
	c.spareVoter = want
	voters, _ := c.voters()
	return fmt.Sprintf("node %d %s the controller voters; voters now %v", id, verb, voters), nil
}

// voters asks DescribeQuorum for the current voters.
func (c *processCluster) voters() ([]int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return nil, fmt.Errorf("DescribeQuorum answered %d topics", len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return nil, err
	}
	var ids []int32
	for _, v := range p.CurrentVoters {
		ids = append(ids, v.ReplicaID)
	}
	return slices.Sorted(slices.Values(ids)), nil
}
