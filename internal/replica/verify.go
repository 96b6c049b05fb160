package replica

import (
	"context"
	"fmt"

	"github.com/strata-stream/strata/internal/batch"
)

// Transaction verification (KIP-890 part 1, for Produce v11 and older).
// A client of transaction version 1 adds a partition to its transaction with
// AddPartitionsToTxn before it produces there; the leader checks that with the
// coordinator before it appends the batch that would open the producer's
// transaction here, so a batch that arrives after its transaction ended (a
// late retry, a zombie) cannot open a transaction no coordinator knows (a
// hanging transaction):
//
//  1. StartTxnVerification returns a guard for the producer id and epoch, or
//     none when the producer's transaction at that epoch is already open here
//     (no check needed). A second call for the same id and epoch while the
//     first is outstanding returns the same guard (the cached verification);
//     one for an older epoch (a zombie's) leaves it in place.
//  2. The caller asks the coordinator (AddPartitionsToTxn VerifyOnly).
//  3. AppendWith (AppendOpts.Verify) appends the batch with the guard. A
//     transactional batch that would open a transaction is refused with
//     ErrInvalidTxnState unless
//     the guard is still the producer's: a marker of the producer appended
//     meanwhile (its transaction ended) or a change of leadership clears it.
//     The append that opens the transaction consumes the guard.
//
// A transactional offset commit (TxnOffsetCommit v4 and older) is verified the
// same way on its group's __consumer_offsets partition: the handler starts the
// verification and asks the coordinator, and the group coordinator's append
// (AppendAsCoordinator with AppendOpts.Verify) checks the guard the handler put in the
// request's context (WithVerificationGuard).

// VerificationGuard identifies one verification of a producer's transaction
// on a partition; 0 is none.
type VerificationGuard uint64

// verification is a producer's outstanding verification here, started at
// started (ms): the cleaner forgets it after producer.id.expiration.ms, as
// Kafka ages out its verification state entries, so the producers that
// verify and never append do not accumulate.
type verification struct {
	epoch   int16
	guard   VerificationGuard
	started int64
}

// StartTxnVerification begins (or joins) the verification of producer pid's
// transaction at epoch before its batch is appended here. It returns 0 when
// the transaction at that epoch is already open on the partition.
func (p *Partition) StartTxnVerification(pid int64, epoch int16) VerificationGuard {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if p.inTxnAtLocked(pid, epoch) {
		return 0
	}
	if v, ok := p.verifications[pid]; ok && v.epoch >= epoch {
		if v.epoch == epoch {
			return v.guard
		}
		// A zombie's (an older epoch): the outstanding verification stays,
		// as Kafka keeps it, and the guard returned, held nowhere, lets no
		// batch in.
		p.lastGuard++
		return p.lastGuard
	}
	p.lastGuard++
	if p.verifications == nil {
		p.verifications = make(map[int64]verification)
	}
	p.verifications[pid] = verification{epoch: epoch, guard: p.lastGuard, started: p.expiry.clock().UnixMilli()}
	return p.lastGuard
}

// checkVerificationLocked refuses a transactional batch that would open a
// transaction without a valid guard. appendMu must be held.
func (p *Partition) checkVerificationLocked(first batch.Header, guard VerificationGuard) error {
	if !first.Transactional() || p.inTxnAtLocked(first.ProducerID, first.ProducerEpoch) {
		return nil
	}
	v, ok := p.verifications[first.ProducerID]
	if guard == 0 || !ok || v.guard != guard || v.epoch != first.ProducerEpoch {
		return fmt.Errorf("%w: partition was not added to producer %d's transaction (or it ended since it was verified)", ErrInvalidTxnState, first.ProducerID)
	}
	return nil
}

// inTxnAtLocked reports whether producer pid's transaction begun at epoch is
// open here. appendMu must be held.
func (p *Partition) inTxnAtLocked(pid int64, epoch int16) bool {
	if e, ok := p.producers.entries[pid]; !ok || e.epoch != epoch {
		return false
	}
	return p.inTxn(pid)
}

// CancelTxnVerification forgets producer pid's verification guard after the
// coordinator refused it (unless a newer one replaced it).
func (p *Partition) CancelTxnVerification(pid int64, guard VerificationGuard) {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if v, ok := p.verifications[pid]; ok && v.guard == guard {
		delete(p.verifications, pid)
	}
}

// guardKey is the context key of a verification guard.
type guardKey struct{}

// WithVerificationGuard returns ctx carrying guard, for an append made
// further down on the request's behalf (the group coordinator's append of a
// verified transactional offset commit).
func WithVerificationGuard(ctx context.Context, guard VerificationGuard) context.Context {
	return context.WithValue(ctx, guardKey{}, guard)
}

// VerificationGuardFrom returns the guard WithVerificationGuard put in ctx;
// ok is false when there is none (the append was not verified).
func VerificationGuardFrom(ctx context.Context) (guard VerificationGuard, ok bool) {
	guard, ok = ctx.Value(guardKey{}).(VerificationGuard)
	return guard, ok
}
