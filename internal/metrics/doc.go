// Package metrics is Strata's Prometheus adapter, the only package that imports
// client_golang. The core packages expose hooks and snapshot methods; this package
// turns them into metrics on one registry per node and serves them in the
// Prometheus text format (docs/observability.md lists every metric).
//
// # Sources
//
//  1. Protocol hooks (protocol.ConnOpenHook, ConnCloseHook, RequestHook,
//     ResponseHook): connections, requests, bytes, latency and in-flight requests
//     per API key. Metrics implements all four: put it in protocol.Server.Hooks.
//  2. A handler wrapper (InstrumentHandler) that reads every response's error codes,
//     top-level and per topic, partition or member, for the request-error counter.
//  3. handlers.Observer: bytes and records produced and fetched per topic, and the
//     delayed produces and fetches waiting right now. Metrics implements it: put it
//     in handlers.Config.Observer.
//  4. Snapshots read at scrape time: hosted partitions (log size, segments, offsets,
//     fsync count and time), the metadata image (under-replicated and offline
//     partitions, the active controller) and consumer group lag (a LagSource, once
//     the group coordinator is wired).
//  5. ISRChanger, a wrapper around the replica layer's ISR changer (the leader's
//     AlterPartition), which counts the ISR shrinks and expands the controller
//     accepts.
//
// # Concurrency
//
// Every method is safe for concurrent use. Hooks run on connection goroutines and
// only touch atomics and per-connection state behind a small mutex; nothing takes a
// lock shared by all connections except a read lock on the per-topic counters. The
// snapshot collectors run on the scraping goroutine and call the sources' own
// thread-safe accessors.
package metrics
