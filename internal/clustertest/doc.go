// Package clustertest holds the acceptance tests of Strata's replication and
// failover, run against real multi-process clusters (internal/testcluster): one
// `strata server` process per node, crashed with SIGKILL, stalled with SIGSTOP,
// stopped with SIGTERM, and talked to with franz-go clients only.
//
// Scenarios (one test each; see the test's doc comment):
//
//	test                                    nodes  fault
//	--------------------------------------  -----  --------------------------------------------
//	TestLeaderCrashKeepsAcknowledgedWrites   3     kill -9 a leader under idempotent acks=all
//	                                               producers, several times; failover timings,
//	                                               also at the default timeouts (bounded at 6s)
//	TestFollowerPauseShrinksAndRejoinsISR    3     SIGSTOP a follower, then SIGCONT
//	TestTwoReplicasDownNotEnoughReplicas     5     kill -9 two of a partition's three replicas
//	TestControllerCrashKeepsMetadata         3     kill -9 the active controller
//	TestOldLeaderTailIsTruncated             3     a leader's unreplicated acks=1 tail, then crash
//	TestClientsAcrossLeaderFailover          3     kill -9 a leader under a producer and a
//	                                               direct-partition consumer
//	TestClusterStopsCleanly                  3     SIGTERM every node: each exits 0
//	TestBrokersJoinRunningCluster            3+2   two broker-only nodes join under an acks=all
//	                                               producer; a topic placed on them
//	TestControllerOnlyNode                   3+1   a controller-only voter, a broker-only node
//	TestReassignmentSurvivesCrashes          3+2   a partition moves onto new brokers; kill -9
//	                                               of an adding replica and of the removed
//	                                               leader during the move
//	TestConsumerProtocolGroup                3     none: franz-go KIP-848 members join and leave
//	                                               under a producer (uniform and range)
//	TestConsumerProtocolCoordinatorCrash     3     kill -9 a KIP-848 group's coordinator: the
//	                                               members rejoin, nothing is lost
//
// What was acknowledged is compared with what is read back by interop/report's
// anomaly checker (lost, duplicate, phantom, reordered, skipped records).
// BenchmarkFailover measures the write stall of leader kills at the default
// timeouts (docs/benchmarks.md). There is no code here outside the tests.
package clustertest
