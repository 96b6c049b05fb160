// Package share is the record-delivery side of KIP-932 share groups: the
// share-partition leader. For each partition this node leads and each share group
// reading it, it keeps the in-flight records (the window from the share-partition
// start offset, SPSO, to the end offset, SPEO): which are available, acquired by a
// member under an acquisition lock, acknowledged or archived, and how often each was
// delivered. It serves ShareFetch and ShareAcknowledge. Group membership and
// assignment (ShareGroupHeartbeat, ShareGroupDescribe) live in package group.
//
// # Pieces
//
//   - Partition (partition.go) is the pure state of one share partition: Acquire,
//     Acknowledge (ACCEPT, RELEASE, REJECT, RENEW, GAP), Expire, ReleaseMember,
//     Snapshot/Restore. It does no I/O and reads no clock; testdata/*.txt drive it.
//   - Manager (manager.go, fetch.go, acquire.go) is the driver: it reads batches
//     from the local replica, keeps time (lock expiry timers), keeps share
//     sessions, long-polls on the replica's high-watermark watchers and on records
//     becoming acquirable, and persists every acquisition and acknowledgement
//     before answering it.
//   - Dead-letter writes (deadletter.go): with a group dead-letter topic (KIP-1191)
//     a record that fails for good is Archiving, saved, written there in the
//     background through a DeadLetterWriter (TopicDeadLetters on a Kafka client),
//     then archived; a failed write makes it available again.
//   - Admin helpers (admin.go) for the group coordinator's share-group offset APIs:
//     lag from a summary, the next state epoch of a reset, a scan for a group's
//     keys on TopicStore, and Manager.Unload, which drops a share partition's
//     in-memory state so its next request reloads it. A node also unloads a group's
//     share partitions once no member of the group has a live share session there,
//     except those where a record is still under an unexpired acquisition lock.
//   - Store (store.go) keeps snapshots durable at the share coordinator.
//     TopicStore sends Kafka's share-state requests (Read/Initialize/Write/
//     DeleteShareGroupState, ReadShareGroupStateSummary) through a Kafka client
//     to the coordinator of the key, found with FindCoordinator (key type share).
//   - Coordinator (coordinator.go) is the share coordinator: the leader of a
//     partition of the compacted internal topic __share_group_state keeps the
//     latest value of each key there, rebuilt from the partition when it becomes
//     leader, serializes the writes of a key, appends each (acks=all) and
//     refuses stale ones: an older state epoch (FENCED_STATE_EPOCH) or an older
//     data-partition leader epoch (FENCED_LEADER_EPOCH). Clients cannot produce
//     to the topic (INVALID_TOPIC_EXCEPTION, as Kafka).
//
// # Calling protocol
//
//  1. NewManager(cfg, store, partitions, logger); cfg.GroupConfig gives each group's
//     lock duration, delivery count limit and share.auto.offset.reset.
//  2. Handlers pass ShareFetch and ShareAcknowledge requests (version set) to the
//     methods of the same name; ShareFetch may wait up to MaxWaitMillis.
//  3. Close on shutdown.
//
// # Durability and failover
//
// A share partition is loaded on its first request under the data partition's
// current leader epoch: a ReadShareGroupState at the coordinator with that epoch,
// which, when it is newer than the stored one, writes the state again under it
// first, so from then on every write of an older leader is refused
// (FENCED_LEADER_EPOCH). A share partition without state is initialized
// (InitializeShareGroupState, state epoch 0) at the log start or high watermark
// (share.auto.offset.reset), read only after Partitions.SyncMetadata has brought
// the node's metadata up to the active controller's (a group config set through
// another node is not read stale), and read again: of two leaders that both found
// no state, the second's initialization is refused and it reads the first's.
// An acknowledgement is answered only once the new snapshot is durable; if the
// save fails the in-memory state is dropped and reloaded, and the acknowledgement
// fails with the code Kafka 4.4 maps the persister's error to (persisterCode), as
// a failed load fails the partition's fetch: NOT_LEADER_OR_FOLLOWER when a newer
// leader fenced this one (its reload is fenced too) or the offsets were reset
// meanwhile (an alteration initializes the next state epoch),
// COORDINATOR_NOT_AVAILABLE while the share coordinator moves or loads,
// UNKNOWN_SERVER_ERROR for anything else (a timeout too).
// An acquisition is saved too before its records are handed out (a failed save
// hands none out), so the saved delivery count of a record is never below one it
// was delivered at: a reload (after a failed save or a failover) delivers it
// again only at a higher count, and fails it for good (FailSpent) when the limit
// was reached. A lock expiry needs no save of its own (the record keeps its
// count; only one archived at the limit is saved). Locks are not saved: after a
// failover acquired records are available again, so a record is delivered at
// least once and accepted at most once (the old locks are unknown to the new
// leader, which answers INVALID_RECORD_STATE to acknowledgements of them); while
// two nodes both believe they lead, the old one's acknowledgements made after the
// new one loaded fail, so no answered acknowledgement is lost. A load asks only the key's state
// partition, so a state partition left without a leader stops the loads of its
// own keys, not everyone's.
//
// # The fetch path
//
// Many members may fetch one share partition. An acquisition decides under the
// share partition's mutex where to read (the first available offset) and
// acquires from the share partition's read cache: the batches of its last log
// read, about twice what one acquisition takes. Only when the cache lacks the
// offsets does a fetch read the log, with the mutex released (one read at a time
// per share partition, behind readMu; fetches that need a read meanwhile use
// the one under way), so acknowledgements and other acquisitions go on during
// the read, and each record is read once however many members take turns. A
// response points into the cache's bytes (never written after the read) rather
// than copying them. An acquisition from the cache takes only what a log read of
// the request's MaxBytes would return (the first batch whatever its size, as
// KIP-74). The cache belongs to one loaded state and is dropped with it. A fetch
// that finds nothing to acquire waits on the share partition; acknowledgements,
// released or expired locks and dead-letter outcomes wake the waiting fetches
// oldest first, only as many as the acquirable records can serve (less what an
// acknowledging ShareFetch takes itself). A fetch that finds the
// in-flight window full while its own member holds records in it is answered
// after 25 ms rather than its MaxWait, as a client that piggybacks its
// acknowledgements on its next ShareFetch (franz-go) cannot send them while this
// one waits, and only acknowledgements make room.
//
// # Concurrency
//
// Manager methods are safe for concurrent use. Manager.mu guards the maps of share
// partitions and sessions; each share partition has its own mutex. A save releases
// that mutex while its write is in flight, so other members acquire and acknowledge
// meanwhile, and the saves that come during a write share the next one (group
// commit, acquisitions included): one write at a time per share partition, each of
// a snapshot taken after every change it answers, so the state is durable in the
// order it was applied. A failed write drops the in-memory state, and every change
// waiting for a write fails with it. Close cancels the background work (dead-letter
// writes, the saves after them, expiry saves) and every load or write in flight,
// and waits for the goroutines it owns at most 10 s. Loads (a new leader epoch,
// Unload) first wait for the writes in flight or waiting, so no old write lands
// over a reloaded state. A share partition's mutex may be held while Manager.mu is
// taken (to start a background dead-letter write), never the reverse. A share
// partition's readMu is taken before its mutex, never while holding it.
//
// Every mutex is released by defer (in a small function where a lock covers only
// part of the work), so a request that panics under one (the broker recovers
// the panic) leaves it free; where a share partition's mutex is handed over
// (released during a read or a write, sharePartition.unlocked) it is taken again
// by defer, and a state write that panics is settled as a failed one.
package share
