package metadata

// notActedOn ends the documentation of a key Strata stores and describes but
// does not act on, so DescribeConfigs never promises what Strata does not do.
const notActedOn = " Strata stores this value but does not act on it yet."

// configDocs is DescribeConfigs' documentation of every key (IncludeDocumentation),
// by key name; a broker key with a topic synonym is documented by the topic key,
// as the default of it (for one broker or cluster-wide). Strata's own words: what Strata does with
// the value.
var configDocs = map[string]string{
	// Topic keys.
	"cleanup.policy": "How old segments are removed: delete (by retention.ms and retention.bytes), " +
		"compact (keep the last record of each key) or both, comma separated; empty for neither (the log is kept whole).",
	"compression.gzip.level": "The gzip level (1 to 9, -1 for gzip's own default) of batches the leader compresses " +
		"to gzip because compression.type is gzip.",
	"compression.lz4.level": "The lz4 level (1 to 17; 9, the default, is lz4's fast compressor) of batches the leader " +
		"compresses to lz4 because compression.type is lz4; Strata's lz4 library compresses levels above 9 as 9.",
	"compression.zstd.level": "The zstd level (-131072 to 22) of batches the leader compresses to zstd because " +
		"compression.type is zstd; Strata's zstd library has four speeds, each standing for a range of levels.",
	"compression.type": "The codec a topic's batches are stored with: uncompressed, gzip, snappy, lz4 or zstd (the leader " +
		"rebuilds each produced batch of another codec with it), or producer (each batch stored as produced).",
	"delete.retention.ms": "How long a compacted topic keeps a tombstone (a record with a null value) " +
		"after compaction reached it, so consumers still see the delete.",
	TopicDeadLetterGroupEnable: "Whether share groups may use this topic as their dead-letter topic " +
		"(errors.deadletterqueue.topic.name).",
	"file.delete.delay.ms": "How long, in milliseconds, the files of a segment that retention, compaction, truncation " +
		"or DeleteRecords removed are kept, renamed to .deleted, before they are removed.",
	"flush.messages": "Fsync the log after this many records. Unset, Strata fsyncs appends in groups " +
		"before acknowledging acks=all; setting this or flush.ms switches the topic to interval flushing.",
	"flush.ms": "Fsync the log when this many milliseconds passed since the last fsync. Unset, Strata fsyncs " +
		"appends in groups before acknowledging acks=all; setting this or flush.messages switches the topic to interval flushing.",
	"follower.replication.throttled.replicas": "The replicas (partition:broker, or *) whose follower fetches " +
		"count against follower.replication.throttled.rate during a partition move.",
	"index.interval.bytes": "How many bytes of batches go between two entries of the offset and time indexes.",
	TopicInternalSegmentBytes: "For tests: the segment size, in bytes, in place of segment.bytes and below its " +
		"1 MiB floor; 0 leaves segment.bytes in force. Listed only where set.",
	"leader.replication.throttled.replicas": "The replicas (partition:broker, or *) whose reads by followers " +
		"count against leader.replication.throttled.rate during a partition move.",
	"local.retention.bytes": "For a tiered topic, how many bytes each partition keeps on local disk once " +
		"uploaded; -2 means retention.bytes.",
	"local.retention.ms":    "For a tiered topic, how long uploaded segments stay on local disk; -2 means retention.ms.",
	"max.compaction.lag.ms": "The longest a record may stay uncompacted in a compacted topic.",
	"max.decompressed.message.bytes": "The largest record, in bytes once its batch is decompressed, a producer may send " +
		"to this topic in a compressed batch; a larger one is refused (INVALID_RECORD). The default sets no practical limit.",
	"max.message.bytes": "The largest record batch, in bytes, a producer may send to this topic.",
	"message.timestamp.after.max.ms": "How far, in milliseconds, a CreateTime timestamp may be ahead of the " +
		"broker's clock; a produced record further ahead is refused (INVALID_TIMESTAMP).",
	"message.timestamp.before.max.ms": "How far, in milliseconds, a CreateTime timestamp may be behind the " +
		"broker's clock; a produced record further behind is refused (INVALID_TIMESTAMP).",
	"message.timestamp.type": "CreateTime keeps the producer's timestamps; LogAppendTime replaces them with " +
		"the broker's clock at append.",
	"min.cleanable.dirty.ratio": "The share of a compacted log not yet compacted above which the cleaner compacts it.",
	"min.compaction.lag.ms":     "The least time a record stays uncompacted in a compacted topic.",
	"min.insync.replicas": "With acks=all, the fewest in-sync replicas that must hold a write before it is " +
		"acknowledged; with fewer, produce fails with NOT_ENOUGH_REPLICAS.",
	"preallocate": "Whether the active segment's file is kept zeroed and fsynced up to 64 MiB ahead of its end, " +
		"or reuses a segment file retention released, so that appends overwrite blocks already on disk and " +
		"their fsyncs skip the file system's journal commit; the zeros are written on top of the data. " +
		"Applies to a partition's log when it is opened.",
	"remote.copy.lag.bytes": "For a tiered topic, how many bytes of newer local data a sealed segment waits for before " +
		"it may be uploaded, unless remote.copy.lag.ms lets it go first (0 at once, -1 local.retention.bytes; " +
		"unbounded, no size check). A segment held back stays local, and holds back those after it; a positive " +
		"value must not exceed a bounded local retention.",
	"remote.copy.lag.ms": "For a tiered topic, how long after its newest record a sealed segment waits before it may " +
		"be uploaded, unless remote.copy.lag.bytes lets it go first (0 at once, -1 local.retention.ms; unbounded, " +
		"no time check). A segment held back stays local, and holds back those after it; a positive value must " +
		"not exceed a bounded local retention.",
	"remote.log.copy.disable": "On a tiered topic, stops uploading segments; the remote part is still read " +
		"and kept by retention.ms and retention.bytes (local retention must then equal them).",
	"remote.log.delete.on.disable": "Must be true to turn remote.storage.enable off on a tiered topic: the " +
		"remote part is then deleted and the log starts at the local log start.",
	"remote.storage.enable": "Whether the topic's sealed segments are uploaded to the object store (tiered " +
		"storage) and read from it once removed locally.",
	"retention.bytes":     "The most bytes each partition keeps before the oldest segments are deleted; -1 (any negative) for no limit.",
	"retention.ms":        "How long a segment is kept after its newest record, in milliseconds; -1 forever.",
	"segment.bytes":       "The size, in bytes, at which the active segment is closed and a new one started; at least 1 MiB.",
	"segment.index.bytes": "The largest offset or time index file of a segment, in bytes; a full index rolls the segment.",
	"segment.jitter.ms":   "The most, in milliseconds, each segment rolls before segment.ms: a random amount drawn when it is created, so segments do not all roll at once.",
	"segment.ms":          "How long, in milliseconds, a segment stays active before it is rolled, even when not full.",
	"unclean.leader.election.enable": "Whether a replica outside the ISR may become leader when no in-sync " +
		"replica is left, at the cost of acknowledged records.",

	// Broker-only keys.
	BrokerDeadLetterAutoCreate: "Whether the first dead-letter write of a share group creates a missing dead-letter topic.",
	BrokerDeadLetterPrefix:     "The prefix every share group's dead-letter topic name must start with.",
	FollowerReplicationThrottledRate: "The bytes per second this broker's followers may fetch for the replicas " +
		"listed in follower.replication.throttled.replicas.",
	LeaderReplicationThrottledRate: "The bytes per second this broker may serve to followers for the replicas " +
		"listed in leader.replication.throttled.replicas.",

	// Group keys.
	GroupConsumerHeartbeatInterval: "How often, in milliseconds, the members of this consumer group (KIP-848) are told to heartbeat.",
	// Client metrics keys (KIP-714 subscriptions).
	ClientMetricsMetrics: "Metric name prefixes the matching clients push (org.apache.kafka.producer. for a " +
		"producer's); * is every metric, empty none. Strata exposes what they push on /metrics.",
	ClientMetricsInterval: "How often, in milliseconds, the matching clients push their metrics (100 to 3600000); " +
		"a client matching several subscriptions pushes at the smallest interval.",
	ClientMetricsMatch: "selector=regex entries a client must all match to get this subscription; selectors: " +
		"client_id, client_instance_id, client_software_name, client_software_version, client_source_address, " +
		"client_source_port. Empty matches every client.",
	GroupConsumerSessionTimeout: "How long, in milliseconds, a member of this consumer group (KIP-848) may go without a " +
		"heartbeat before it is removed.",
	GroupDeadLetterCopyRecord: "Whether a share group's dead-letter records carry the original record's key and value.",
	GroupDeadLetterTopic:      "The topic a share group writes records to once their delivery count limit is reached.",
	GroupShareAutoOffsetReset: "Where a share group starts on a partition it has no state for: latest, earliest " +
		"or by_duration:<ISO 8601 duration> (the first record that recent, else latest).",
	GroupShareDeliveryCountLimit: "How many times a share group delivers a record before it is archived " +
		"(or sent to the dead-letter topic).",
	GroupShareHeartbeatInterval: "How often, in milliseconds, members of this share group are told to heartbeat.",
	GroupShareIsolationLevel: "How a share group reads transactional records: read_committed delivers only those of " +
		"committed transactions (below the last stable offset), read_uncommitted every record.",
	GroupShareRecordLockDuration: "How long, in milliseconds, a share consumer holds a record it fetched before " +
		"it is released to others.",
	GroupShareSessionTimeout: "How long, in milliseconds, a member of this share group may go without a " +
		"heartbeat before it is removed.",
}

// Doc is the key's DescribeConfigs documentation.
func (d ConfigDef) Doc() string { return configDocs[d.Name] }
