// Package chaos is Strata's fault-injection suite: it runs a real cluster under a
// client workload, injects faults on a seeded schedule, heals, drains and checks
// that the durability and ordering promises held.
//
// # A run, step by step
//
//  1. Start a cluster: 3 or 5 `strata server` processes (internal/testcluster),
//     or 3 in-process nodes (server.Start) on in-memory disks for the disk and
//     power faults; either way every link runs through a fault-injecting proxy
//     (network.go, netfault).
//  2. Create a topic: several partitions, three replicas, min.insync.replicas=2.
//  3. Start the workload (workload.go): idempotent acks=all producers of keyed
//     records with unique values, readers of every partition recording every
//     poll, and a consumer group that commits after processing. Everything goes
//     into a history.Recorder.
//  4. Inject faults drawn from NewSchedule(seed): each is resolved to a node by
//     its role (a partition's leader or follower, the active controller, any),
//     held, healed, and followed by a wait until every partition is fully
//     replicated again. Events are logged with their times.
//  5. Heal everything, stop the producers (outcomes not known by then stay
//     unknown), wait until the group has committed up to the end, read every
//     partition whole with a fresh consumer.
//  6. Check the history (history.Check) and the log agreement: every in-sync
//     replica's copy below the high-water mark, read from the stopped node's data
//     with storage.Open, must be byte-identical to the others and hold what the
//     final read returned.
//
// # Faults
//
//	fault            cluster      how
//	---------------  -----------  ----------------------------------------------------
//	kill             processes    SIGKILL, restart after the hold (page cache kept)
//	pause            processes    SIGSTOP for the hold, then SIGCONT
//	rolling-restart  processes    SIGTERM each node in turn; restart; wait in sync
//	partition        processes    netfault isolates the node: clients, fetches, Raft
//	                              and controller link to and from it all stall
//	partition-peers  processes    the same, but clients still reach the node: a
//	                              deposed leader keeps taking their writes
//	disk-full        in-process   the node's writes fail with ENOSPC; then a power
//	                              cycle of that node
//	fsync-failure    in-process   the node's fsyncs fail with EIO; then a power cycle
//	power-loss       in-process   every node's disk frozen and every link cut at one
//	                              instant, each restarted on vfs.MemFS.CrashClone
//	                              (torn writes on)
//
// A network partition needs per-node addresses: testcluster gives every node the
// same flags, so the harness points it at a wrapper script (wrapper.go) that
// adds each node's --advertised-kafka-addr and --controllers (one proxy per
// directed controller link) and execs strata. Proxies, not network namespaces:
// they need no root, work with testcluster's loopback addresses, and let a test
// tell a follower's fetches from a client's by the Kafka client id.
//
// A power loss freezes every node's disk (freezeFS) and cuts every link at one
// instant, so nothing later becomes durable or is heard, waits for the disk
// changes under way, and clones what each disk had fsynced. The old in-process
// nodes run on until stopped, unheard, so the history is checked as recorded.
// The controller's Raft log and snapshots are on the same disk and are cut
// too; disk-full and fsync faults hit only the partition logs (mem.go).
//
// Bugs the runs found have deterministic regression tests in
// regression_test.go.
//
// # Running it
//
// `go test ./internal/chaos` runs one seeded multi-process run of about a minute
// and the in-process power-loss and disk-fault runs. `make chaos` runs the long
// campaign (TestCampaign with CHAOS_CAMPAIGN=1) and rewrites the results table in
// docs/reliability.md. CHAOS_SEED picks the seed of the short runs.
//
// # Concurrency
//
// The harness drives lifecycle faults from the test goroutine (testcluster
// requires it); the workload's clients run on their own goroutines and only
// touch the Recorder, which is safe for concurrent use.
package chaos
