// Package metadata owns Strata's cluster metadata model: the records of the
// metadata log (brokers, topics, partitions and their reassignments, configs,
// producer-id blocks), their binary encoding, the topic-config table, and the
// Image they build.
//
// It is pure: no goroutines, no I/O, no clocks. The controller replicates records
// with Raft and feeds them to Apply; brokers read the resulting images.
//
// # Concurrency
//
// An *Image and everything reachable from it (Topic, Partition, Broker, maps,
// slices) is immutable once returned, so any number of goroutines may read one
// image without locks while a new one is built. Apply copies on write: topics are
// kept in 64 maps sharded by id, and a batch copies only the shards, topics,
// partitions and brokers its records touch (the name index only when topics are
// created or removed); everything else is shared with the previous image. An ISR
// change in a cluster of 10,000 topics costs about 14µs (BenchmarkApplyPartitionChange).
//
// # Applying
//
//  1. A plan (package controller) reads an image and emits records.
//  2. The records of one request travel as one batch (one Raft log entry).
//  3. ApplyAll applies a batch all or nothing, re-validating every record, so a
//     record planned against a stale image fails deterministically on every node
//     instead of corrupting the state.
//
// # Encoding
//
// A batch, the payload of one Raft log entry:
//
//	+------------+--------------+-------------------+-------------------------+
//	| magic 0xA7 | version 1 u8 | count (uvarint)   | count x record          |
//	+------------+--------------+-------------------+-------------------------+
//
// A record:
//
//	+-----------------+-------------+----------------+---------------------+
//	| length (uvarint)| type u8     | version u8 (0) | body (length-2 B)   |
//	+-----------------+-------------+----------------+---------------------+
//
// Body fields are written in the order the record struct declares them:
//
//	int32, int64          big-endian two's complement
//	bool                  one byte, 0 or 1
//	UUID                  16 bytes
//	string                uvarint length, then the bytes
//	[]int32               uvarint count, then count x int32
//	map[string]string     uvarint count, then count x (key string, value string),
//	                      keys strictly ascending
//	ResourceType          one byte
//
// The encoding is canonical (minimal uvarints, ordered map keys, 0/1 bools, no
// trailing bytes), so a value has exactly one encoding. Decoding checks every
// length against the bytes left before allocating; malformed input returns an
// error wrapping ErrCorrupt, and a type or version this build does not know
// returns ErrUnsupportedVersion. A new field means a new record version.
//
// Rolling upgrades: a node of an older build refuses a whole batch that holds
// a type or version it does not know (its image stays as it was), so a change
// every node must apply uses only types and versions the previous release
// writes, and what older nodes may miss goes in a batch of its own
// (BrokerFeaturesRecord, BrokerDirectoryRecord, ControlledShutdownRecord).
//
// A snapshot, the payload of a Raft snapshot:
//
//	+--------------+--------------+--------------+-------------------+--------------+
//	| magic "STMS" | version 1 u8 | offset u64BE | batch (Records()) | CRC-32C u32BE |
//	+--------------+--------------+--------------+-------------------+--------------+
//
// The CRC (Castagnoli) covers every byte before it. The batch holds the records
// that rebuild the image from NewImage; offset is the image's Raft index.
//
// # Topic configs
//
// One table (TopicConfigDefs) lists every topic key with its type, default,
// validator and broker-level synonym. A topic's effective value is its override,
// else the cluster-wide dynamic broker value of the synonym (broker resource ""),
// else the default; the image keeps it resolved in Topic.Config. On one broker
// (Image.TopicConfigOn, what its logs and DescribeConfigs use) the broker's own
// dynamic value of the synonym (resource "<id>") comes before the cluster-wide
// one, as in Kafka.
package metadata
