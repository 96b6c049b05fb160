package controller

import (
	"context"
	"errors"

	"github.com/strata-stream/strata/internal/acl"
	"github.com/strata-stream/strata/internal/metadata"
)

// The methods below run a plan against the latest image and propose its records
// as one batch, serialised with every other plan on the active controller (see
// run). Per-item failures are in the results; the error is for the request as a
// whole (ErrNotController, ErrClosed, ctx, or a rejected batch) and then no
// result applies. validateOnly plans without proposing.

// CreateTopics creates topics.
func (c *Controller) CreateTopics(ctx context.Context, reqs []CreateTopic, validateOnly bool) ([]CreateTopicResult, error) {
	var results []CreateTopicResult
	err := c.run(ctx, func(img *metadata.Image) ([]metadata.Record, error) {
		var recs []metadata.Record
		recs, results = PlanCreateTopics(img, reqs, c.cfg.DefaultPartitions, c.cfg.Rand, c.sessions(c.cfg.clock()).shuttingDown(), c.cfg.RemoteStorage)
		return unlessValidateOnly(recs, validateOnly), nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// DeleteTopics deletes topics with their partitions and configs.
func (c *Controller) DeleteTopics(ctx context.Context, refs []TopicRef) ([]DeleteTopicResult, error) {
	var results []DeleteTopicResult
	err := c.run(ctx, func(img *metadata.Image) ([]metadata.Record, error) {
		var recs []metadata.Record
		recs, results = PlanDeleteTopics(img, refs)
		return recs, nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// CreatePartitions adds partitions to topics.
func (c *Controller) CreatePartitions(ctx context.Context, reqs []CreatePartitions, validateOnly bool) ([]CreatePartitionsResult, error) {
	var results []CreatePartitionsResult
	err := c.run(ctx, func(img *metadata.Image) ([]metadata.Record, error) {
		var recs []metadata.Record
		recs, results = PlanCreatePartitions(img, reqs, c.sessions(c.cfg.clock()).shuttingDown())
		return unlessValidateOnly(recs, validateOnly), nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// AlterConfigs replaces the dynamic configs of resources.
func (c *Controller) AlterConfigs(ctx context.Context, reqs []AlterConfigsResource, validateOnly bool) ([]ConfigResult, error) {
	var results []ConfigResult
	err := c.run(ctx, func(img *metadata.Image) ([]metadata.Record, error) {
		var recs []metadata.Record
		recs, results = PlanAlterConfigs(img, reqs, c.cfg.RemoteStorage)
		return unlessValidateOnly(recs, validateOnly), nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// IncrementalAlterConfigs sets, deletes, appends to or subtracts from dynamic
// config values.
func (c *Controller) IncrementalAlterConfigs(ctx context.Context, reqs []IncrementalAlterConfigsResource, validateOnly bool) ([]ConfigResult, error) {
	var results []ConfigResult
	err := c.run(ctx, func(img *metadata.Image) ([]metadata.Record, error) {
		var recs []metadata.Record
		recs, results = PlanIncrementalAlterConfigs(img, reqs, c.cfg.RemoteStorage)
		return unlessValidateOnly(recs, validateOnly), nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// AllocateProducerIDs hands a block of ProducerIDBlockSize producer ids to a
// registered broker. No block is ever handed out twice, across restarts and
// leader changes.
func (c *Controller) AllocateProducerIDs(ctx context.Context, brokerID int32, brokerEpoch int64) (ProducerIDBlock, error) {
	var block ProducerIDBlock
	err := c.run(ctx, func(img *metadata.Image) (recs []metadata.Record, err error) {
		recs, block, err = PlanAllocateProducerIDs(img, brokerID, brokerEpoch)
		return recs, err
	})
	if err != nil {
		return ProducerIDBlock{}, err
	}
	return block, nil
}

// RegisterBroker registers a broker (live) and returns its broker epoch. A
// new incarnation of a broker whose current registration has a live session
// gets ErrDuplicateBrokerRegistration (see PlanRegisterBroker). Registering
// counts as a heartbeat, from the moment the registration is planned: the
// session check cannot fence it while the steps below are still running.
//
// The broker's features (req.Features) and data directory id
// (req.DirectoryID) are recorded after the registration, each in a proposal
// of its own (PlanBrokerFeatures, PlanBrokerDirectory); a retry of a
// registration records what is missing, so a broker registered by a
// controller that predates them has them recorded by sending its
// registration again.
//
// With req.ObserverAddr (a broker-only node) the node also becomes a
// non-voting member of the quorum at that address once registered, unless it
// is one already; a node id held by a voter is refused first, with
// ErrDuplicateBrokerRegistration. No unregistration or voter removal runs
// meanwhile (Controller.observers).
func (c *Controller) RegisterBroker(ctx context.Context, req RegisterBroker) (int64, error) {
	known := true
	if req.ObserverAddr != "" {
		if err := c.lockObservers(ctx); err != nil {
			return 0, err
		}
		defer c.observers.Unlock()
		var err error
		if known, err = c.observerKnown(req.ID, req.ObserverAddr); err != nil {
			return 0, err
		}
	}
	var epoch int64
	err := c.run(ctx, func(img *metadata.Image) (recs []metadata.Record, err error) {
		now := c.cfg.clock()
		live := c.sessions(now)
		session := false
		if old := img.Broker(req.ID); old != nil {
			session = live.hasSession(req.ID, old.Epoch, now)
		}
		recs, epoch, err = PlanRegisterBroker(img, req, session, live.shuttingDown())
		if err == nil && len(recs) > 0 {
			live.registering(req.ID, epoch, now)
		}
		return recs, err
	})
	if err != nil {
		return 0, err
	}
	if len(req.Features) > 0 {
		err := c.run(ctx, func(img *metadata.Image) ([]metadata.Record, error) {
			return PlanBrokerFeatures(img, req.ID, epoch, req.Features)
		})
		if err != nil {
			return 0, err
		}
	}
	if !req.DirectoryID.IsZero() {
		err := c.run(ctx, func(img *metadata.Image) ([]metadata.Record, error) {
			return PlanBrokerDirectory(img, req.ID, epoch, req.DirectoryID)
		})
		if err != nil {
			return 0, err
		}
	}
	if !known {
		if err := c.addObserver(ctx, req.ID, req.ObserverAddr); err != nil {
			return 0, err
		}
	}
	c.live.registered(req.ID, epoch, c.cfg.clock())
	return epoch, nil
}

// BrokerHeartbeat records that a broker is alive and answers whether it is
// fenced and whether its controlled shutdown is complete (PlanBrokerHeartbeat).
// Liveness lives in memory on the active controller, not in the log: a
// heartbeat proposes records only when it unfences the broker or moves its
// controlled shutdown on.
func (c *Controller) BrokerHeartbeat(ctx context.Context, req HeartbeatRequest) (HeartbeatResult, error) {
	now := c.cfg.clock()
	// Note the heartbeat before queueing for the plan semaphore, so that a
	// busy controller does not fence a broker whose heartbeat is waiting.
	if c.IsLeader() {
		if b := c.Image().Broker(req.BrokerID); b != nil && b.Epoch == req.BrokerEpoch {
			c.sessions(now).touch(req.BrokerID, req.BrokerEpoch, now)
		}
	}
	for {
		var (
			res            HeartbeatResult
			st             HeartbeatState
			proposed, mark bool
		)
		err := c.run(ctx, func(img *metadata.Image) ([]metadata.Record, error) {
			b, err := checkBrokerEpoch(img, req.BrokerID, req.BrokerEpoch)
			if err != nil {
				return nil, err
			}
			st = c.sessions(c.cfg.clock()).heartbeat(req, b.Fenced, int64(img.Offset()), now)
			var recs []metadata.Record
			recs, res, err = PlanBrokerHeartbeat(img, req, st)
			if proposed = len(recs) > 0; proposed {
				_, mark = recs[0].(*metadata.ControlledShutdownRecord)
			}
			return recs, err
		})
		if err != nil {
			return HeartbeatResult{}, err
		}
		if proposed {
			off := int64(c.Image().Offset())
			switch {
			case res.Fenced:
				c.live.fenced(req.BrokerID, req.BrokerEpoch, off)
			case st.ShuttingDown[req.BrokerID] && !mark:
				c.live.handedOff(req.BrokerID, req.BrokerEpoch, off)
			}
		}
		// The mark of a controlled shutdown went in a batch of its own: plan
		// the hand-off now rather than at the broker's next heartbeat. The
		// broker need not see its own mark before it stops (fenced, it may
		// join no ISR anyway), only the hand-off.
		if !mark {
			return res, nil
		}
	}
}

// AlterPartitions applies the ISR changes of one AlterPartition request,
// proposed by partitions' leaders, in one proposal and returns each partition
// as applied or why its change was refused (PlanAlterPartitions). The error,
// when not nil, answers every change: none was applied (a stale broker epoch)
// or, ctx having ended, all may still be.
func (c *Controller) AlterPartitions(ctx context.Context, reqs []AlterPartitionRequest) ([]AlterPartitionResult, error) {
	var results []AlterPartitionResult
	err := c.run(ctx, func(img *metadata.Image) (recs []metadata.Record, err error) {
		recs, results, err = PlanAlterPartitions(img, reqs, c.sessions(c.cfg.clock()).shuttingDown())
		return recs, err
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// ElectLeaders runs an election of type typ for parts, or for every
// partition when parts is nil (PlanElectLeaders).
func (c *Controller) ElectLeaders(ctx context.Context, parts []TopicPartitionRef, typ ElectionType) ([]ElectResult, error) {
	var results []ElectResult
	err := c.run(ctx, func(img *metadata.Image) (recs []metadata.Record, err error) {
		recs, results = PlanElectLeaders(img, parts, typ, c.sessions(c.cfg.clock()).shuttingDown())
		return recs, nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// FenceBroker fences a broker and moves leadership away from it. The broker's
// next heartbeat unfences it again once it has seen the change.
func (c *Controller) FenceBroker(ctx context.Context, id int32, epoch int64) error {
	err := c.run(ctx, func(img *metadata.Image) ([]metadata.Record, error) {
		return PlanFenceBroker(img, id, epoch, c.sessions(c.cfg.clock()).shuttingDown())
	})
	if err == nil {
		c.live.fenced(id, epoch, int64(c.Image().Offset()))
	}
	return err
}

// UnfenceBroker makes a fenced broker live again.
func (c *Controller) UnfenceBroker(ctx context.Context, id int32, epoch int64) error {
	return c.run(ctx, func(img *metadata.Image) ([]metadata.Record, error) {
		return PlanUnfenceBroker(img, id, epoch, c.sessions(c.cfg.clock()).shuttingDown())
	})
}

func unlessValidateOnly(recs []metadata.Record, validateOnly bool) []metadata.Record {
	if validateOnly {
		return nil
	}
	return recs
}

// AlterPartitionReassignments starts, replaces or cancels partition
// reassignments (PlanAlterReassignments); errs[i] is reqs[i]'s outcome.
func (c *Controller) AlterPartitionReassignments(ctx context.Context, reqs []Reassignment) ([]error, error) {
	var errs []error
	err := c.run(ctx, func(img *metadata.Image) ([]metadata.Record, error) {
		var recs []metadata.Record
		recs, errs = PlanAlterReassignments(img, reqs, c.sessions(c.cfg.clock()).shuttingDown())
		return recs, nil
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

// AlterScramCredentials deletes and sets SCRAM credentials; see
// PlanAlterScramCredentials.
func (c *Controller) AlterScramCredentials(ctx context.Context, dels []ScramDeletion, ups []ScramUpsertion) ([]ScramResult, error) {
	var results []ScramResult
	err := c.run(ctx, func(img *metadata.Image) ([]metadata.Record, error) {
		var recs []metadata.Record
		recs, results = PlanAlterScramCredentials(img, dels, ups)
		return recs, nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// CreateAcls adds ACL bindings; see PlanCreateAcls.
func (c *Controller) CreateAcls(ctx context.Context, bindings []acl.Binding) ([]error, error) {
	var errs []error
	err := c.run(ctx, func(img *metadata.Image) ([]metadata.Record, error) {
		var recs []metadata.Record
		recs, errs = PlanCreateAcls(img, bindings)
		return recs, nil
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

// UnregisterBroker removes a broker's registration (PlanUnregisterBroker) and,
// for a broker-only node, its non-voting membership of the quorum, so the
// metadata log is no longer sent to it. A voter keeps its vote. A broker
// registered no more (an earlier call wrote its removal, then failed or timed
// out before the membership change) is refused with
// ErrBrokerIDNotRegistered, as Kafka refuses it, but still leaves the quorum.
func (c *Controller) UnregisterBroker(ctx context.Context, id int32) error {
	if err := c.lockObservers(ctx); err != nil {
		return err
	}
	defer c.observers.Unlock()
	err := c.run(ctx, func(img *metadata.Image) ([]metadata.Record, error) {
		return PlanUnregisterBroker(img, id, c.sessions(c.cfg.clock()).shuttingDown())
	})
	if err != nil && !errors.Is(err, metadata.ErrBrokerIDNotRegistered) {
		return err
	}
	if rerr := c.removeObserver(ctx, id); rerr != nil {
		return rerr
	}
	return err
}

// DeleteAcls removes the ACL bindings the filters match; see PlanDeleteAcls.
func (c *Controller) DeleteAcls(ctx context.Context, filters []acl.Filter) ([]AclDeletion, error) {
	var results []AclDeletion
	err := c.run(ctx, func(img *metadata.Image) ([]metadata.Record, error) {
		var recs []metadata.Record
		recs, results = PlanDeleteAcls(img, filters)
		return recs, nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// AlterClientQuotas sets and removes client quotas; see PlanAlterClientQuotas.
func (c *Controller) AlterClientQuotas(ctx context.Context, entries []QuotaAlteration, validateOnly bool) ([]error, error) {
	var errs []error
	err := c.run(ctx, func(img *metadata.Image) ([]metadata.Record, error) {
		var recs []metadata.Record
		recs, errs = PlanAlterClientQuotas(img, entries)
		return unlessValidateOnly(recs, validateOnly), nil
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}
