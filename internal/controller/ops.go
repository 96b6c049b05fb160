package controller

import (
	"context"

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
		recs, results = PlanCreateTopics(img, reqs, c.cfg.DefaultPartitions, c.cfg.Rand)
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
		recs, results = PlanCreatePartitions(img, reqs)
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
		recs, results = PlanAlterConfigs(img, reqs)
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
		recs, results = PlanIncrementalAlterConfigs(img, reqs)
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

// RegisterBroker registers a broker (live) and returns its broker epoch.
func (c *Controller) RegisterBroker(ctx context.Context, req RegisterBroker) (int64, error) {
	var epoch int64
	err := c.run(ctx, func(img *metadata.Image) (recs []metadata.Record, err error) {
		recs, epoch, err = PlanRegisterBroker(img, req)
		return recs, err
	})
	if err != nil {
		return 0, err
	}
	return epoch, nil
}

// FenceBroker fences a broker and moves leadership away from it.
func (c *Controller) FenceBroker(ctx context.Context, id int32, epoch int64) error {
	return c.run(ctx, func(img *metadata.Image) ([]metadata.Record, error) {
		return PlanFenceBroker(img, id, epoch)
	})
}

// UnfenceBroker makes a fenced broker live again.
func (c *Controller) UnfenceBroker(ctx context.Context, id int32, epoch int64) error {
	return c.run(ctx, func(img *metadata.Image) ([]metadata.Record, error) {
		return PlanUnfenceBroker(img, id, epoch)
	})
}

func unlessValidateOnly(recs []metadata.Record, validateOnly bool) []metadata.Record {
	if validateOnly {
		return nil
	}
	return recs
}
