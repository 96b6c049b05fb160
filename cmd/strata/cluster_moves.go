package main

// Shared by the commands that move partitions (decommission, rebalance):
// reading the cluster, submitting the reassignments and waiting for them with
// progress on stderr.

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// movesPoll is how often a command rechecks its moves.
const movesPoll = 500 * time.Millisecond

// moveStart is where the commands that move replicas (rebalance,
// decommission) start from: an admin client and the cluster's metadata, read
// within ctx, which --timeout bounds and which the commands go on using to
// plan and submit their moves.
type moveStart struct {
	cl  *kgo.Client
	adm *kadm.Client
	md  kadm.Metadata
	ctx context.Context
	// close ends ctx and closes the client.
	close func()
}

// startMoves opens an admin client and reads the cluster's metadata.
func (s *session) startMoves(ctx context.Context) (*moveStart, error) {
	cl, adm, err := s.admin(ctx)
	if err != nil {
		return nil, err
	}
	opCtx, cancel := s.withTimeout(ctx)
	m := &moveStart{cl: cl, adm: adm, ctx: opCtx, close: func() { cancel(); cl.Close() }}
	if m.md, err = adm.Metadata(opCtx); err != nil {
		m.close()
		return nil, err
	}
	return m, nil
}

// submitMoves starts the reassignments of req, failing on the first partition
// the controller refused.
func submitMoves(ctx context.Context, adm *kadm.Client, req kadm.AlterPartitionAssignmentsReq) error {
	res, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return err
	}
	for _, r := range res.Sorted() {
		if r.Err != nil {
			return brokerError(fmt.Sprintf("moving %s-%d", r.Topic, r.Partition), r.Err, r.ErrMessage)
		}
	}
	return nil
}

// awaitMoves polls left, the number of the total partitions not yet moved,
// until it is 0, printing "<what>: N of TOTAL partitions moved" to stderr
// each time it changes and once at the end. When wait passes first it returns
// the last count and the context's error.
func awaitMoves(ctx context.Context, s *session, what string, total int, wait time.Duration, left func(context.Context) (int, error)) (int, error) {
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(movesPoll)
	defer tick.Stop()
	reported := -1
	for {
		n, err := left(waitCtx)
		if err == nil && n == 0 {
			break
		}
		if err == nil && n != reported {
			fmt.Fprintf(s.env.stderr, "%s: %d of %d partitions moved\n", what, total-n, total)
			reported = n
		}
		select {
		case <-tick.C:
		case <-waitCtx.Done():
			return n, waitCtx.Err()
		}
	}
	fmt.Fprintf(s.env.stderr, "%s: %d of %d partitions moved\n", what, total, total)
	return 0, nil
}
