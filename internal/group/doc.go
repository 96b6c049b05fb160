// Package group is Strata's classic consumer group coordinator: group membership
// (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), committed offsets (OffsetCommit,
// OffsetFetch, OffsetDelete) and group administration (ListGroups, DescribeGroups,
// DeleteGroups), with Kafka's semantics for the classic protocol: generations,
// protocol selection by vote, MEMBER_ID_REQUIRED (KIP-394), static membership
// (KIP-345), batch leave, initial rebalance delay, rebalance, session and sync
// timeouts, and offset retention (KIP-211). It also serves the KIP-848 consumer group
// protocol (ConsumerGroupHeartbeat, ConsumerGroupDescribe): server-side assignors
// (uniform, range), member epochs and revoke-before-assign reconciliation; see
// consumer.go. Classic and KIP-848 members mix in one group through KIP-848's online
// migration (group.consumer.migration.policy, bidirectional by default): a classic
// group converts to a consumer group when a KIP-848 member joins, classic members of
// a consumer group are served from it by JoinGroup/SyncGroup/Heartbeat/LeaveGroup,
// and the group converts back when its last KIP-848 member goes; see migration.go.
// group.consumer.max.size and group.classic.max.size bound both kinds of group and
// the conversions between them (maxsize.go).
// Share groups (KIP-932) have
// their membership here (share.go) and their offset admin APIs
// (DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets;
// share_offsets.go), which read and write the share-partition state through
// Config.ShareState.
// KIP-1071 streams groups (StreamsGroupHeartbeat, StreamsGroupDescribe) are in
// streams.go and streams_api.go: the topology a member registers, the internal
// topics the broker is to create, active and standby tasks (assigned over
// processes by streams_assignor.go) and warm-up tasks (streams_warmup.go).
// KIP-848 consumer, streams and share groups are written to
// __consumer_offsets in Kafka's consumer, streams and share group records
// (consumer_records.go, streams_records.go, share_records.go,
// modern_records.go) and survive a failover. KIP-848 and streams members share one revoke-first reconciliation
// (recon.go).
//
// It owns the groups of the partitions of __consumer_offsets this node leads. The
// group with id g lives in partition PartitionFor(g, OffsetsTopicPartitions); a request
// for a group of a partition that is not loaded gets NOT_COORDINATOR, one for a
// partition still loading COORDINATOR_LOAD_IN_PROGRESS. FindCoordinator itself is
// answered by the broker, which knows who leads each partition.
//
// # Calling protocol
//
//  1. New(cfg, store, logger). store is the broker's OffsetStore on __consumer_offsets;
//     cfg.Topics tells the KIP-848 assignors which topics exist.
//  2. When this node becomes leader of partition p of __consumer_offsets at leader
//     epoch e, call LoadPartitionAt(ctx, p, e, records) with the partition's records
//     from its start (every append for p then carries e: a write begun under an
//     earlier load is refused once p is loaded again); when it stops leading p,
//     UnloadPartition(p). A single node loads every partition.
//  3. Kafka handlers pass decoded kmsg requests (version set) to the method of the same
//     name and send back the response, which has the request's version. Put the
//     client id and address in ctx with WithClient for JoinGroup. Handlers check the
//     version against Versions(). Calls may block: JoinGroup until the rebalance
//     completes, SyncGroup until the leader's assignment is durable, commits and
//     deletions until their records are appended.
//  4. When topics disappear from the metadata image, call TopicsDeleted so their
//     committed offsets go too.
//  5. Lag views (HTTP API, CLI) call CommittedOffsets and Lag with the high watermarks
//     the replica layer knows.
//  6. Close on shutdown.
//
// # Concurrency
//
// Every method is safe for concurrent use. Each group has its own mutex guarding its
// whole state; methods named xLocked run with it held and never do I/O. The mutex is
// only taken in a function that releases it with defer (group.withLock, or a small
// function of its own), so a request that panics with it held (the broker recovers
// the panic) does not leave its group locked for every later request. Lock order is
// group, then coordinator, then partition: the coordinator's and partitions' mutexes
// guard only their maps and never wait for a group. A request parks on its group as
// a channel (a delayed operation: no goroutine per member); timers (time.AfterFunc:
// session, rebalance, sync, retention check) and appends that complete later answer
// it.
//
// Records leave a group through its write queue: whoever finds the queue idle starts
// the group's writer goroutine, which appends the queue with OffsetStore.Append
// outside the mutex, one Append at a time, and exits when the queue is empty. Each
// key's records thus reach the log in the order they were decided, and no request
// waits for appends other than its own. State changes that must be durable first
// (offsets, the leader's assignment, deletions) apply when the append returns; a
// failed append becomes a retriable error code. A group no write of which was
// ever appended goes again when one fails, as Kafka's coordinator runtime
// reverts the state of a failed write: the simple group of a commit (plain or
// transactional, generation -1; also when it appends nothing) and the consumer,
// share or streams group of a first heartbeat. A consumer, share or streams
// group whose records fail to be appended is rebuilt from what the log holds
// (revert.go). ListGroups, the describe APIs and a reload agree.
//
// # Records
//
// Group metadata and offsets are records of __consumer_offsets in Kafka's own schemas
// (kmsg OffsetCommitKey/Value, GroupMetadataKey/Value), so the log is readable by Kafka
// tooling. All integers are big-endian; strings are int16 length + bytes, nullable
// strings use length -1, bytes are int32 length + bytes, arrays int32 count + items.
// A tombstone is the key with a null value. Replay reads key versions 0-2 and value
// versions 0-4, the consumer group record types 3 and 5-8, the share group record
// types 10-14 and the streams group record types 17 and 19-23
// (consumer_records.go, share_records.go and streams_records.go have their
// layout), and skips keys of other versions.
//
//	Offset commit: one per group, topic and partition
//	  key    | int16 version=1 | string group | string topic | int32 partition |
//	  value  | int16 version=3 | int64 offset | int32 leader epoch | string metadata |
//	         | int64 commit time (ms) |
//	  value  | int16 version=1 | int64 offset | string metadata | int64 commit time |
//	         | int64 expire time (ms) |   (only for v2-v4 commits with a retention time)
//
//	Group metadata: one per group, rewritten at each generation and assignment
//	  key    | int16 version=2 | string group |
//	  value  | int16 version=3 | string protocol type | int32 generation |
//	         | nullable string protocol | nullable string leader |
//	         | int64 state time (ms) | array members |
//	  member | string member id | nullable string instance id | string client id |
//	         | string client host | int32 rebalance timeout (ms) |
//	         | int32 session timeout (ms) | bytes subscription | bytes assignment |
//
// A group that was Stable when its partition was last led comes back Stable with its
// members and assignments and fresh session timeouts; members that are gone expire.
package group
