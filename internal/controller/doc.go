// Package controller runs Strata's controller quorum: the metadata log
// replicated with hashicorp/raft, applied to a metadata.Image, and the pure plan
// functions that turn admin requests into metadata records.
//
// # Pieces
//
//   - Plans (Plan*, ElectLeader): pure functions from an image and a request to
//     records and per-item results or typed errors (metadata's sentinels, which
//     carry Kafka codes). No I/O; table-tested.
//   - fsm: Raft's state machine. Each log entry is one metadata batch applied
//     all or nothing; the new image is published with an atomic pointer and
//     offered to watchers without blocking Raft's apply goroutine.
//   - Controller: owns Raft, its stores (package raftstore on Config.FS: file
//     raft.wal, snapshots in directory snapshots/) and transport
//     (TCP, or one a test passes in), and runs plans on the leader. A sole
//     voter lowers its election timeouts at start so it leads at once, and
//     restores them when another voter joins (sole_voter.go). The leader
//     follows each applied proposal with a Raft barrier, so the other members
//     learn the new commit index at once rather than after Raft's idle
//     CommitTimeout (commit_push.go).
//   - Broker sessions (liveness): the active controller's in-memory record of
//     each broker's last heartbeat and controlled shutdown. It is not in the
//     log (only a controlled shutdown's start is marked there, for the
//     brokers: metadata.ControlledShutdownRecord): a node that becomes the
//     active controller starts every registered broker's clock afresh, a
//     grace period of one SessionTimeout.
//   - Proof of death (probe.go): a broker whose controller-link connection
//     closed (BrokerLinkClosed, from the link server), or that a new active
//     controller has not heard from yet, is probed with a TCP connect to its
//     Raft address; a refused connection ends its session at once. The
//     leader watch (leader_watch.go) lets a follower voter that finds the
//     silent leader's address refusing connections stand for election early.
//
// # Cluster duties of the active controller
//
//   - Fencing: a background loop, acting only on the leader, fences every
//     broker whose last heartbeat is older than SessionTimeout or that a
//     probe proved dead, all in one proposal (PlanFenceBroker): partitions it led elect a new leader from
//     the rest of the ISR with a new leader epoch, and it leaves every ISR
//     where another member remains. As the last ISR member it stays, and the
//     partition has no leader until it returns, so nothing acknowledged is lost.
//   - Unfencing: a fenced broker's heartbeat unfences it once its metadata
//     offset shows it has seen its fencing; it then leads the leaderless
//     partitions whose ISR holds it (PlanBrokerHeartbeat).
//   - Controlled shutdown: heartbeats with WantShutdown mark the broker in
//     controlled shutdown in the metadata (so leaders stop counting it), then
//     hand off leadership to other ISR members and take the broker out of
//     ISRs; once nothing more can be handed off and the broker has seen the
//     hand-off, it is fenced and told to shut down. Brokers in controlled
//     shutdown are never elected and never join an ISR.
//   - Registration: a new incarnation of a broker whose registration has a
//     live session is refused (DUPLICATE_BROKER_REGISTRATION); otherwise it
//     replaces the old registration, which is fenced first. A broker-only node
//     (RegisterBroker.ObserverAddr) also becomes a non-voting Raft member, so
//     the metadata log reaches it (observers.go); UnregisterBroker removes
//     both again. Registrations, unregistrations and voter removals change
//     the membership one at a time, so a registered broker-only node is
//     always a member.
//   - Voter changes (voters.go): AddVoter promotes an observer to a voter;
//     RemoveVoter demotes a broker voter to an observer or removes a
//     controller-only one; the active controller removing itself steps
//     down once that commits. Quorum (quorum.go)
//     describes the members and their progress for DescribeQuorum.
//   - Voter directories (voter_directory.go): each voter's data directory
//     is recorded, and Raft connections to it name it, so a node restarted
//     under a voter's id on an empty data dir is not taken for the voter.
//   - Reassignments (PlanAlterReassignments): a partition's replicas move to a
//     target set; the adding replicas follow the leader until the ISR holds
//     the whole target, and the AlterPartition that gets it there completes
//     the move in the same batch (the removed replicas leave, a removed leader
//     hands over first).
//   - AlterPartition: ISR changes from partition leaders, every partition of
//     a request in one proposal (PlanAlterPartitions).
//   - Preferred leader election: on request (ElectLeaders) and every
//     LeaderImbalanceCheckInterval if set.
//
// # Data dir
//
//	<DataDir>/raft.wal      Raft log and stable state (see raftstore)
//	<DataDir>/snapshots/    Raft snapshots; each holds metadata.EncodeSnapshot
//
// Both go through Config.FS, so an in-memory filesystem's power cut takes what
// they had not fsynced. A raft.db (the bbolt store of earlier versions, package
// boltstore) is migrated into raft.wal at the first start and kept as
// raft.db.migrated.
//
// A data dir without Raft state is fresh: Start bootstraps the static voter set
// into it once (an Observer never bootstraps; it waits to be added). Later
// starts recover membership from the log, runtime voter changes included.
//
// # Concurrency
//
// Image, Watch, IsLeader and LeaderID never block and are safe from any
// goroutine. The admin and broker methods (CreateTopics, ..., BrokerHeartbeat,
// AlterPartition, Propose) and the background duties may run concurrently; on
// the leader they plan one at a time:
//
//  1. take the plan semaphore (or give up with ctx);
//  2. if this node does not lead, return ErrNotController;
//  3. once per Raft term, wait for a barrier so the image includes everything
//     earlier leaders committed;
//  4. plan against the current image, propose the records as one entry and wait
//     until this node has applied it.
//
// So a plan always sees the effect of the previous one, and two concurrent
// requests to create the same topic cannot both succeed. Apply re-validates
// every record as a second line of defence.
//
// A heartbeat notes its arrival time before it queues for the semaphore, so
// a busy controller does not fence a broker whose heartbeat is waiting. The
// session record has its own lock, never held across a proposal.
//
// Raft's own goroutines call the fsm; Close stops Raft and the duty loop,
// closes watcher channels and the stores.
package controller
