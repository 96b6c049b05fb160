// Package txn is the transaction coordinator: the state of each transactional
// id on the __transaction_state partitions this broker leads, its transitions
// (pure functions in state.go), and the completion of ended transactions.
//
// # Calling protocol
//
//  1. offsets.Store calls LoadPartitionAt when this broker becomes leader of a
//     partition of __transaction_state, with the partition's leader epoch (the
//     coordinator epoch its markers carry, and the epoch every state write
//     carries: the Store refuses one of an earlier load) and its records;
//     transactions found prepared are completed again. UnloadPartition when
//     leadership goes.
//  2. The handlers call InitProducerID, AddPartitions, VerifyPartitions and
//     EndTxn; each returns a Kafka error code. At most one change per
//     transactional id is in flight; others get CONCURRENT_TRANSACTIONS, and
//     Completed(id) is a channel closed when that change is over, to wait on
//     instead of polling.
//  3. EndTxn writes the Prepare state and answers. A goroutine then writes the
//     markers through the MarkerWriter (committed on every partition), makes
//     the Complete state the id's state and ends the change. The Complete state
//     is written in one batch ahead of the id's next state (one commit for
//     both), or alone after Config.CompleteDelay, never waited for: a lost
//     Complete state leaves the Prepare state, which the next coordinator
//     completes again.
//  4. The overlap: while the markers of a transaction-version-2 end are
//     written, the next transaction's adds are served (AddPartitions), and
//     their Ongoing states name the markers as owed (Meta.Owed, a tagged
//     field of the record); every other request for the id still gets
//     CONCURRENT_TRANSACTIONS. A coordinator that loads a state naming owed
//     markers writes them again before it serves the id. Partitions keep the
//     next transaction's batches behind the marker (replica.ErrTxnMarkerPending).
//  5. Pre-added partitions: the Prepare state an EndTxn v5 writes names the
//     transaction's partitions as pre-added to the producer's next
//     transaction (Meta.Preadded). The next transaction's first add, when
//     all of its partitions are pre-added, writes its Ongoing state without
//     waiting for its commit (AppendUnacked, which starts no fsync of its
//     own: the next Prepare state's covers it), so the producer's first batch
//     is appended at once. A coordinator that loads such a Prepare state
//     completes it and then resumes it: the id is Ongoing on the pre-added
//     partitions, at the Prepare state's epoch (resumed).
//
// # Concurrency
//
// Coordinator.mu guards the loaded partitions and their entries; it is never
// held across a state write or a marker write, and it is only taken in a
// function that releases it with defer (Coordinator.withLock, or a small
// function of its own), so a request that panics with it held (the broker
// recovers the panic) does not leave every transactional id waiting for it. A
// partition's completions run under its context, cancelled on unload.
//
// The durability rules and coordinator epochs are described in
// docs/transactions.md.
package txn
