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
//   - Controller: owns Raft, its stores (package boltstore, file raft.db),
//     snapshots (raft's FileSnapshotStore, directory snapshots/) and transport
//     (TCP, or one a test passes in), and runs plans on the leader.
//
// # Data dir
//
//	<DataDir>/raft.db       Raft log and stable state (see boltstore)
//	<DataDir>/snapshots/    Raft snapshots; each holds metadata.EncodeSnapshot
//
// A data dir without Raft state is fresh: Start bootstraps the static voter set
// into it once. Later starts recover membership from the log.
//
// # Concurrency
//
// Image, Watch, IsLeader and LeaderID never block and are safe from any
// goroutine. The admin methods (CreateTopics, ..., Propose) may be called
// concurrently; on the leader they run one at a time:
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
// Raft's own goroutines call the fsm; Close stops Raft, closes watcher
// channels and the stores.
package controller
