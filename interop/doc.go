// Package interop is the real-client interoperability suite: it proves that unmodified
// Kafka clients (the Java client, confluent-kafka for Python, kafkajs for Node, kcat)
// cannot tell Strata from Kafka. The package has no code of its own, only its test,
// which runs the client programs beside it against a broker and checks their JSON
// summaries with interop/report.
//
// The test, step by step:
//
//  1. Start the target broker: the strata binary (default), or franz-go's in-memory
//     kfake with STRATA_INTEROP_TARGET=kfake.
//  2. Create one topic per client, 3 partitions, replication factor 1, with kadm.
//  3. Run each client once: it produces 200 keyed records with headers (acks=all) and
//     reads its topic back from the earliest offset without a consumer group.
//  4. Check each run (report.Check): every acknowledged record read exactly once and
//     unchanged, offsets dense and increasing per partition, per-key order kept, and
//     every key on keyhash.Partition(key, 3), the Java client's choice.
//  5. Cross-read: every client reads every other client's topic, checked the same way.
//  6. Stop the broker (strata: SIGTERM, and it must exit 0).
//
// The clients must be installed first: interop/install.sh. A missing client or runtime
// skips its subtest loudly, or fails it when CI=true. See README.md.
package interop
