// Package httpapi owns Strata's HTTP/JSON API: produce, poll, commit and seek for
// services that only speak HTTP, and topic and group administration. It reaches
// the same logs, group coordinator and committed offsets as the Kafka protocol, so
// an HTTP consumer and a Kafka client consumer in one group share its partitions.
// api/openapi.json is its contract (served at /openapi.json); docs/http.md is the
// user's guide.
//
//	POST   /produce                              one record -> {partition, offset}
//	POST   /topics/{topic}/records               many records -> one result each
//	GET    /poll, POST /poll                     records for a group (or share-group) member
//	POST   /commit                               commit one offset or a member's positions
//	POST   /ack                                  accept/release/reject a share-group record
//	POST   /groups/{group}/seek                  move a group to earliest/latest/time/offset
//	POST   /groups/{group}/configs               set group configs
//	DELETE /groups/{group}/consumers/{consumer}  close a member now
//	GET    /groups, GET /groups/{group}          groups; members, offsets, lag
//	POST   /topics, GET /topics                  create (retention "7d", "500MB"), list
//	GET    /topics/{topic}, DELETE /topics/{topic}
//	GET    /openapi.json
//
// # Records
//
// A record's value is any JSON value, stored as its compact JSON bytes: the string
// "abc" is stored with its quotes, an object as compact JSON. value_b64 stores
// arbitrary bytes; a null or absent value is a null value (a tombstone). A key is a
// string stored as its UTF-8 bytes (so it lands on the partition a Kafka client
// producing the same string key picks: keyhash.Partition) or key_b64. Polls show
// a value that is valid JSON as that JSON and any other value in value_b64 (value
// is then null); keys and header values that are UTF-8 as strings, others in
// key_b64 and value_b64.
//
// # Produce
//
// A record with neither key nor partition goes round robin. acks is 0, 1 or "all"
// (the default); with acks=0 the offset is -1. Records of a partition this node
// leads are built into one batch (batch.Build) and appended directly
// (replica.Partition.Append, then WaitCommitted for acks=all); records of a
// partition led elsewhere go through an embedded franz-go producer, one per acks
// level. BenchmarkProduce compares the two paths.
//
// # Consumer instances
//
// A poll acts as the member (group, consumer) of this node; consumer defaults to
// "default". The first poll creates the instance: an embedded franz-go group
// consumer of one topic (cooperative-sticky, else range; auto-commit off) on this
// node's Kafka listener, so the group protocol is the real client's and works on
// any node. A new member starts each partition it is assigned at the group's
// committed offset, or at the log start without one ("reset":"latest": the high-
// water mark). Every poll moves the instance's position past what it returned,
// independently of commits, once its answer is written; a poll whose client went
// away first moves it back. POST /commit without a partition commits those
// positions; with one, it commits the given offset (as the instance when there is
// one, since the coordinator takes commits for an active group only from members;
// else as an admin, which works while the group has no members). A seek moves
// the positions of the group's instances here and commits the offsets, so other
// members see them when they are next assigned the partitions. An instance that
// nothing uses for its session timeout is closed and leaves the group.
//
// A poll with "share": true makes the instance a share-group member instead
// (share.go): its own heartbeats, ShareFetch to each partition leader and
// ShareAcknowledge for POST /ack, as the Java KafkaShareConsumer speaks them.
//
// # Topics and groups
//
// Topic changes, group descriptions, listings of offsets and admin commits go
// through an embedded admin client (kadm) on this node's Kafka listener, so the
// Kafka handlers' forwarding to the active controller and the client's lookup of
// each group's coordinator make any node answer for the whole cluster; this node's
// own coordinator only holds the groups of the __consumer_offsets partitions it
// leads. Topic listings and partition state come from this node's metadata image.
//
// # Errors
//
// Every error is {"error":{"code","message"}}. Kafka errors keep their name as
// the code (TOPIC_ALREADY_EXISTS); domain errors become Kafka codes through the
// Kafka handlers' own mapping (handlers.ErrorCode), and kafkaStatus turns codes into
// statuses: 400 bad input, 404 unknown topic, partition, group or consumer, 409
// conflicts (topic exists, consumer bound to another topic, commit refused by an
// active group), 413 too large, 503 no leader or too few in-sync replicas (or
// which node holds a consumer instance cannot be told now, with Retry-After), 504
// timeouts. Bad input never gets a 500.
//
// # Access control
//
// With Config.Guard set, every route but /openapi.json needs credentials when SASL
// is on, and the caller's principal is authorized with the node's ACLs before the
// API calls on the cluster (access.go); the embedded clients act as the node.
//
// # Concurrency
//
// Every handler is safe for concurrent use. The consumer registry's mutex guards
// the instance map and each instance's use count and idle timer, and is never held
// across I/O. Polls of one instance are serialised by its pollMu; commits and
// seeks do not wait for a poll in progress. The embedded clients are safe for
// concurrent use. A share-group member's locks (the instance's pollMu, the
// member's sessMu and mu, share.go) are released by defer, so a poll or an
// acknowledgement that panics (net/http recovers it) does not leave the
// instance's later requests waiting for them.
package httpapi
