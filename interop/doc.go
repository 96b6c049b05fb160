// Package interop is the real-client interoperability suite: it proves that unmodified
// Kafka clients (the Java client, confluent-kafka for Python, kafkajs for Node, kcat)
// cannot tell Strata from Kafka. The package has no code of its own, only its tests,
// which run the client programs beside it against brokers and check their JSON
// summaries with interop/report.
//
// TestInterop, step by step:
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
//  6. Groups: each client reads another client's topic as the only member of a group,
//     twice: the first run reads everything once (report.CheckGroup) and leaves the end
//     offsets committed, the second reads nothing.
//  7. Mixed group: the Java client and kcat join one group, split the partitions of an
//     empty topic, and between them read what Python then writes, each record once.
//  8. Stop the broker (strata: SIGTERM, and it must exit 0).
//
// TestFailover runs a 3-node Strata cluster (internal/testcluster), has the Java client
// produce (idempotent, acks=all) and consume in a group at once, kills a partition
// leader that also coordinates the group with SIGKILL, and checks the client's history
// with report.CheckAtLeastOnce: nothing acknowledged lost, per-key order kept, nothing
// written twice.
//
// TestConsumerProtocol runs the KIP-848 protocol (group.protocol=consumer) on a 3-node
// cluster: two Java members and a franz-go member share a group, the Java members leave
// once caught up, and report.CheckGroup finds every record read exactly once.
//
// TestKafkaStreamsFailover runs Kafka Streams with exactly_once_v2 on 3 nodes while
// its transaction coordinator is killed and restarted, and finds every word counted
// exactly once; TestKafkaStreamsGroupProtocol runs it with group.protocol=streams
// (KIP-1071), two instances, one leaving; TestGroupTransactSessionRebalance runs franz-go's
// GroupTransactSession across two rebalances with the output exactly once.
// TestSASLClients logs confluent-kafka and kafkajs in over SASL_PLAINTEXT and
// SASL_SSL with every SCRAM mechanism and PLAIN, and sees an ACL denial.
//
// TestShareGroups and TestShareFailover run KIP-932 share groups with the Java
// KafkaShareConsumer and Kafka 4.4's share tools on 3 nodes, the second killing a
// partition leader while records are acquired.
// TestKafkaShareGroupOffsets drives the share-group offset APIs with
// kafka-share-groups (describe, reset, delete offsets, delete the group) and checks
// what a console share consumer then receives. TestMixedGroupProtocols puts classic
// and KIP-848 franz-go members in one group, both ways round.
//
// TestConnectFileStream, TestConnectExactlyOnceSource and TestConnectWorkerFailover
// run Kafka Connect workers (interop/connect) with file and MirrorSource connectors,
// exactly-once source support and a worker killed mid-transaction; TestMirrorMaker
// runs MirrorMaker 2 between two clusters.
//
// The clients must be installed first: interop/install.sh. A missing client or runtime
// skips its subtest loudly, or fails it when CI=true. See README.md.
package interop
