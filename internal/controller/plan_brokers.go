package controller

import (
	"fmt"
	"maps"
	"math"

	"github.com/strata-stream/strata/internal/metadata"
)

// ProducerIDBlockSize is how many producer ids one allocation hands out.
const ProducerIDBlockSize = 1000

// RegisterBroker is a broker's registration: who it is and where clients reach it.
type RegisterBroker struct {
	ID          int32
	Incarnation metadata.UUID // random per process start
	// DirectoryID identifies the broker's data directory, made with it (zero:
	// unknown). Another one than the last registration's means the
	// broker's replicas lost their logs.
	DirectoryID metadata.UUID
	Host        string
	Port        int32
	Rack        string
	// ObserverAddr is the Raft address of a broker-only node, which the active
	// controller adds to the quorum as a non-voting member (not a record: the
	// Raft configuration holds it). Empty for a voter.
	ObserverAddr string
	// Features are the Strata-internal features the broker supports, at
	// their highest level (metadata.SupportedFeatures of its build); a build
	// that predates them sends none.
	Features map[string]int32
}

// ProducerIDBlock is a range of producer ids owned by one broker: [First,
// First+Len).
type ProducerIDBlock struct {
	First int64
	Len   int32
}

// PlanRegisterBroker registers a broker, live, with a new broker epoch, and
// elects it leader of leaderless partitions it can lead.
//
// A broker epoch is never handed out twice for an id, across unregistrations,
// restarts and controller failovers: as Kafka's is the offset of its
// registration record, Strata's is the metadata offset (Raft index) the
// registration is planned against, plus one. Every earlier registration of
// the id is in that image, so every epoch it had is at most that offset; the
// registration's own log entry comes after it. (An image built without a log,
// at offset 0, falls back to one above the current epoch.)
//
// A retry by the same incarnation of a live broker changes nothing and returns
// the current epoch. A different incarnation is refused with
// ErrDuplicateBrokerRegistration while the current registration is unfenced and
// liveSession says it heartbeated within the session timeout; otherwise it
// replaces the old one, which is first fenced like a broker whose session
// expired: the partitions the old process led move to other ISR members (a new
// leader epoch) and it leaves the ISRs it is not the last member of, since a
// restarted process may lack what the old one had not yet made durable. down
// are the brokers in controlled shutdown.
//
// A registration whose DirectoryID differs from the one recorded for the last
// registration (both known; PlanBrokerDirectory records it), also one that
// UnregisterBroker removed (metadata.Image.FormerDirectory), comes from a new,
// empty data directory with the old node id: the broker leaves every ISR, as
// the last member too (changesAfterLostDir), and catches up as a follower like
// a new replica.
func PlanRegisterBroker(img *metadata.Image, req RegisterBroker, liveSession bool, down ShuttingDown) ([]metadata.Record, int64, error) {
	if req.ID < 0 || req.Host == "" || req.Port <= 0 || req.Port > math.MaxUint16 {
		return nil, 0, fmt.Errorf("%w: broker %d at %q port %d", metadata.ErrInvalidRequest, req.ID, req.Host, req.Port)
	}
	epoch := int64(img.Offset()) + 1
	var recs []metadata.Record
	if old := img.Broker(req.ID); old != nil {
		if old.Incarnation == req.Incarnation && !old.Fenced &&
			old.Host == req.Host && old.Port == req.Port && old.Rack == req.Rack {
			return nil, old.Epoch, nil
		}
		if old.Incarnation != req.Incarnation && !old.Fenced {
			if liveSession {
				return nil, 0, fmt.Errorf("%w: broker %d has a live session (epoch %d, incarnation %s)",
					metadata.ErrDuplicateBrokerRegistration, req.ID, old.Epoch, old.Incarnation)
			}
			var err error
			if recs, err = PlanFenceBroker(img, req.ID, old.Epoch, down); err != nil {
				return nil, 0, err
			}
		}
		if lostDir(old.DirectoryID, req.DirectoryID) {
			fenced, err := metadata.ApplyAll(img, recs)
			if err != nil {
				return nil, 0, err
			}
			recs = append(recs, changesAfterLostDir(fenced, req.ID, down)...)
		}
		epoch = max(epoch, old.Epoch+1)
	} else if lostDir(img.FormerDirectory(req.ID), req.DirectoryID) {
		recs = changesAfterLostDir(img, req.ID, down)
	}
	recs = append(recs, &metadata.RegisterBrokerRecord{
		BrokerID: req.ID, Incarnation: req.Incarnation, Epoch: epoch,
		Host: req.Host, Port: req.Port, Rack: req.Rack,
	})
	next, err := metadata.ApplyAll(img, recs)
	if err != nil {
		return nil, 0, err
	}
	return append(recs, changesAfterUnfence(next, req.ID, down)...), epoch, nil
}

// lostDir reports whether a registration with directory id dir comes from
// another data directory than the last registration's, last (both known).
func lostDir(last, dir metadata.UUID) bool {
	return !last.IsZero() && !dir.IsZero() && last != dir
}

// PlanBrokerFeatures records the Strata-internal features of broker id's
// registration epoch; nothing when they are recorded already. The records go
// in a batch of their own (see metadata.BrokerFeaturesRecord).
func PlanBrokerFeatures(img *metadata.Image, id int32, epoch int64, features map[string]int32) ([]metadata.Record, error) {
	b, err := checkBrokerEpoch(img, id, epoch)
	if err != nil {
		return nil, err
	}
	if maps.Equal(b.Features, features) {
		return nil, nil
	}
	recs := []metadata.Record{&metadata.BrokerFeaturesRecord{BrokerID: id, Epoch: epoch, Features: features}}
	if _, err := metadata.ApplyAll(img, recs); err != nil {
		return nil, err
	}
	return recs, nil
}

// PlanBrokerDirectory records the data directory id of broker id's
// registration epoch; nothing when it is recorded already or dir is zero. The
// record goes in a batch of its own after the registration's (see
// metadata.BrokerDirectoryRecord): the registration batch holds only record
// types and versions every earlier build applies.
func PlanBrokerDirectory(img *metadata.Image, id int32, epoch int64, dir metadata.UUID) ([]metadata.Record, error) {
	b, err := checkBrokerEpoch(img, id, epoch)
	if err != nil || dir.IsZero() || b.DirectoryID == dir {
		return nil, err
	}
	recs := []metadata.Record{&metadata.BrokerDirectoryRecord{BrokerID: id, Epoch: epoch, DirectoryID: dir}}
	if _, err := metadata.ApplyAll(img, recs); err != nil {
		return nil, err
	}
	return recs, nil
}

// PlanFenceBroker fences a broker's current registration: it leaves every ISR
// it is not the last member of, and the partitions it led elect new leaders from
// their ISR (or, where the topic allows unclean election, any live replica),
// never a broker in down. Fencing a fenced broker changes nothing.
func PlanFenceBroker(img *metadata.Image, id int32, epoch int64, down ShuttingDown) ([]metadata.Record, error) {
	b, err := checkBrokerEpoch(img, id, epoch)
	if err != nil || b.Fenced {
		return nil, err
	}
	recs := []metadata.Record{&metadata.FenceBrokerRecord{BrokerID: id, Epoch: epoch}}
	return append(recs, changesAfterFence(img, id, down)...), nil
}

// planFenceBrokers fences the current registrations of several brokers in one
// batch, each planned against the image the earlier ones leave, so no
// partition is handed to a broker fenced in the same batch. It returns the
// records and the brokers it fenced (unknown and already fenced ones are
// skipped).
func planFenceBrokers(img *metadata.Image, ids []int32, down ShuttingDown) ([]metadata.Record, []int32, error) {
	var (
		all    []metadata.Record
		fenced []int32
	)
	for _, id := range ids {
		b := img.Broker(id)
		if b == nil || b.Fenced {
			continue
		}
		recs, err := PlanFenceBroker(img, id, b.Epoch, down)
		if err == nil {
			img, err = metadata.ApplyAll(img, recs)
		}
		if err != nil {
			return nil, nil, err
		}
		all = append(all, recs...)
		fenced = append(fenced, id)
	}
	return all, fenced, nil
}

// PlanUnregisterBroker removes broker id's registration (UnregisterBroker).
// A live broker is fenced first, in the same batch, as if its session had
// expired: its leaderships move to other ISR members and it leaves the ISRs it
// is not the last member of. Partitions keep the id in their replica lists;
// a broker being retired has its replicas moved off first (reassignments).
// The image keeps the removed registration's directory id, so a broker that
// comes back under the id from another data directory is told apart
// (PlanRegisterBroker). An id nobody holds gets ErrBrokerIDNotRegistered.
func PlanUnregisterBroker(img *metadata.Image, id int32, down ShuttingDown) ([]metadata.Record, error) {
	b := img.Broker(id)
	if b == nil {
		return nil, metadata.KafkaText(metadata.ErrBrokerIDNotRegistered, "Broker ID %d is not currently registered", id)
	}
	recs, err := PlanFenceBroker(img, id, b.Epoch, down)
	if err != nil {
		return nil, err
	}
	return append(recs, &metadata.UnregisterBrokerRecord{BrokerID: id, Epoch: b.Epoch}), nil
}

// PlanUnfenceBroker makes a fenced broker live again and elects it leader of
// leaderless partitions it can lead. Unfencing a live broker changes nothing.
func PlanUnfenceBroker(img *metadata.Image, id int32, epoch int64, down ShuttingDown) ([]metadata.Record, error) {
	b, err := checkBrokerEpoch(img, id, epoch)
	if err != nil || !b.Fenced {
		return nil, err
	}
	recs := []metadata.Record{&metadata.UnfenceBrokerRecord{BrokerID: id, Epoch: epoch}}
	return append(recs, changesAfterUnfence(img, id, down)...), nil
}

// HeartbeatRequest is a broker's periodic heartbeat (Kafka's BrokerHeartbeat).
type HeartbeatRequest struct {
	BrokerID    int32
	BrokerEpoch int64
	// MetadataOffset is how far the broker has applied the metadata log
	// (Controller.AppliedOffset: its image's offset or past it). A fenced broker is unfenced, and a broker in
	// controlled shutdown told to stop, only once it has seen the changes that
	// concern it.
	MetadataOffset int64
	// WantShutdown starts (or continues) a controlled shutdown.
	WantShutdown bool
}

// HeartbeatResult is the controller's answer to a heartbeat.
type HeartbeatResult struct {
	// Fenced: the broker may not lead or join ISRs (until a later heartbeat
	// unfences it).
	Fenced bool
	// ShouldShutdown: the controlled shutdown is complete; the broker leads
	// nothing any more, is fenced, and may stop.
	ShouldShutdown bool
}

// HeartbeatState is what the active controller remembers in memory about a
// broker between heartbeats.
type HeartbeatState struct {
	// ShuttingDown holds every broker in controlled shutdown, including this
	// one once it has asked.
	ShuttingDown ShuttingDown
	// UnfenceOffset is the metadata offset a fenced broker must have applied
	// to be unfenced: at least that of its fencing.
	UnfenceOffset int64
	// ShutdownOffset is the offset of the last hand-off of the broker's
	// controlled shutdown, which it must have applied before it may stop.
	ShutdownOffset int64
}

// PlanBrokerHeartbeat answers one heartbeat of a broker's current registration.
//
//   - A live broker not shutting down: nothing changes.
//   - A fenced broker that has applied st.UnfenceOffset and does not want to
//     shut down is unfenced and leads the leaderless partitions it can.
//   - A broker entering controlled shutdown is first marked in it
//     (metadata.ControlledShutdownRecord, alone in the batch: a build that
//     predates the record type refuses the batch that holds it), so that
//     every broker's image knows before the hand-off takes it out of the
//     ISRs: a leader then neither waits for it nor proposes it back (KIP-841,
//     as Kafka's controller writes InControlledShutdown). The hand-off follows
//     in the next plan.
//   - A marked broker in controlled shutdown hands off what it can
//     (changesForShutdown) in this heartbeat's records. Once nothing more can
//     be handed off and it has applied st.ShutdownOffset, it is fenced
//     (partitions it could not hand off become leaderless, keeping it as
//     their ISR) and told to shut down.
func PlanBrokerHeartbeat(img *metadata.Image, req HeartbeatRequest, st HeartbeatState) ([]metadata.Record, HeartbeatResult, error) {
	b, err := checkBrokerEpoch(img, req.BrokerID, req.BrokerEpoch)
	if err != nil {
		return nil, HeartbeatResult{}, err
	}
	id := req.BrokerID
	shutting := req.WantShutdown || st.ShuttingDown[id]
	switch {
	case b.Fenced && shutting:
		return nil, HeartbeatResult{Fenced: true, ShouldShutdown: true}, nil
	case b.Fenced && req.MetadataOffset < st.UnfenceOffset:
		return nil, HeartbeatResult{Fenced: true}, nil
	case b.Fenced:
		recs, err := PlanUnfenceBroker(img, id, b.Epoch, st.ShuttingDown)
		return recs, HeartbeatResult{}, err
	case !shutting:
		return nil, HeartbeatResult{}, nil
	case !b.InControlledShutdown:
		return []metadata.Record{&metadata.ControlledShutdownRecord{BrokerID: id, Epoch: b.Epoch}}, HeartbeatResult{}, nil
	}
	down := st.ShuttingDown
	if !down[id] {
		down = maps.Clone(down)
		if down == nil {
			down = make(ShuttingDown)
		}
		down[id] = true
	}
	if recs := changesForShutdown(img, id, down); len(recs) > 0 {
		return recs, HeartbeatResult{}, nil
	}
	if req.MetadataOffset < st.ShutdownOffset {
		return nil, HeartbeatResult{}, nil
	}
	recs, err := PlanFenceBroker(img, id, b.Epoch, down)
	return recs, HeartbeatResult{Fenced: true, ShouldShutdown: true}, err
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

// checkBrokerEpoch returns broker id's registration if its epoch is epoch. A
// broker id nobody holds is a stale epoch too (ErrStaleBrokerEpoch, wrapping
// ErrUnknownBroker), as Kafka's controller answers a request of a broker whose
// registration it does not have: STALE_BROKER_EPOCH, so the broker registers
// again.
func checkBrokerEpoch(img *metadata.Image, id int32, epoch int64) (*metadata.Broker, error) {
	b := img.Broker(id)
	if b == nil {
		return nil, fmt.Errorf("%w: %w: broker %d is not registered", metadata.ErrStaleBrokerEpoch, metadata.ErrUnknownBroker, id)
	}
	if b.Epoch != epoch {
		return nil, fmt.Errorf("%w: broker %d epoch %d, current %d", metadata.ErrStaleBrokerEpoch, id, epoch, b.Epoch)
	}
	return b, nil
}
