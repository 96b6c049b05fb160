package controller

import (
	"fmt"
	"math"

	"github.com/strata-stream/strata/internal/metadata"
)

// ProducerIDBlockSize is how many producer ids one allocation hands out.
const ProducerIDBlockSize = 1000

// RegisterBroker is a broker's registration: who it is and where clients reach it.
type RegisterBroker struct {
	ID          int32
	Incarnation metadata.UUID // random per process start
	Host        string
	Port        int32
	Rack        string
}

// ProducerIDBlock is a range of producer ids owned by one broker: [First,
// First+Len).
type ProducerIDBlock struct {
	First int64
	Len   int32
}

// PlanRegisterBroker registers a broker, live, with an epoch above any it had
// before, and elects it leader of leaderless partitions it can lead. A retry by
// the same incarnation of a live broker changes nothing and returns the
// current epoch.
func PlanRegisterBroker(img *metadata.Image, req RegisterBroker) ([]metadata.Record, int64, error) {
	if req.ID < 0 || req.Host == "" || req.Port <= 0 || req.Port > math.MaxUint16 {
		return nil, 0, fmt.Errorf("%w: broker %d at %q port %d", metadata.ErrInvalidRequest, req.ID, req.Host, req.Port)
	}
	epoch := int64(1)
	if old := img.Broker(req.ID); old != nil {
		if old.Incarnation == req.Incarnation && !old.Fenced &&
			old.Host == req.Host && old.Port == req.Port && old.Rack == req.Rack {
			return nil, old.Epoch, nil
		}
		epoch = old.Epoch + 1
	}
	recs := []metadata.Record{&metadata.RegisterBrokerRecord{
		BrokerID: req.ID, Incarnation: req.Incarnation, Epoch: epoch,
		Host: req.Host, Port: req.Port, Rack: req.Rack,
	}}
	next, err := metadata.ApplyAll(img, recs)
	if err != nil {
		return nil, 0, err
	}
	return append(recs, changesAfterUnfence(next, req.ID)...), epoch, nil
}

// PlanFenceBroker fences a broker's current registration: it leaves every ISR
// it is not the last member of, and the partitions it led elect new leaders from
// their ISR (or, where the topic allows unclean election, any live replica).
// Fencing a fenced broker changes nothing.
func PlanFenceBroker(img *metadata.Image, id int32, epoch int64) ([]metadata.Record, error) {
	b, err := checkBrokerEpoch(img, id, epoch)
	if err != nil || b.Fenced {
		return nil, err
	}
	recs := []metadata.Record{&metadata.FenceBrokerRecord{BrokerID: id, Epoch: epoch}}
	return append(recs, changesAfterFence(img, id)...), nil
}

// PlanUnfenceBroker makes a fenced broker live again and elects it leader of
// leaderless partitions it can lead. Unfencing a live broker changes nothing.
func PlanUnfenceBroker(img *metadata.Image, id int32, epoch int64) ([]metadata.Record, error) {
	b, err := checkBrokerEpoch(img, id, epoch)
	if err != nil || !b.Fenced {
		return nil, err
	}
	recs := []metadata.Record{&metadata.UnfenceBrokerRecord{BrokerID: id, Epoch: epoch}}
	return append(recs, changesAfterUnfence(img, id)...), nil
}

// PlanAllocateProducerIDs hands the next block of producer ids to a registered
// broker. Blocks never overlap and never repeat: the image's next producer id
// only grows, and it is part of every snapshot.
func PlanAllocateProducerIDs(img *metadata.Image, brokerID int32, brokerEpoch int64) ([]metadata.Record, ProducerIDBlock, error) {
	if _, err := checkBrokerEpoch(img, brokerID, brokerEpoch); err != nil {
		return nil, ProducerIDBlock{}, err
	}
	first := img.NextProducerID()
	if first > math.MaxInt64-ProducerIDBlockSize {
		return nil, ProducerIDBlock{}, fmt.Errorf("%w: producer ids exhausted", metadata.ErrProducerIDs)
	}
	rec := &metadata.ProducerIDsRecord{BrokerID: brokerID, BrokerEpoch: brokerEpoch, NextProducerID: first + ProducerIDBlockSize}
	return []metadata.Record{rec}, ProducerIDBlock{First: first, Len: ProducerIDBlockSize}, nil
}

func checkBrokerEpoch(img *metadata.Image, id int32, epoch int64) (*metadata.Broker, error) {
	b := img.Broker(id)
	if b == nil {
		return nil, fmt.Errorf("%w: broker %d is not registered", metadata.ErrUnknownBroker, id)
	}
	if b.Epoch != epoch {
		return nil, fmt.Errorf("%w: broker %d epoch %d, current %d", metadata.ErrStaleBrokerEpoch, id, epoch, b.Epoch)
	}
	return b, nil
}
