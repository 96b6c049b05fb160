package metadata

import "fmt"

// CheckTopicConfigs checks the rules that tie several topic keys together, on
// the configuration a new topic would have with these overrides and
// cluster-wide broker values (CheckTopicConfigChange with no previous
// overrides).
func CheckTopicConfigs(overrides, clusterDefaults map[string]string, remoteStorage bool) error {
	return CheckTopicConfigChange(nil, overrides, clusterDefaults, remoteStorage)
}

// CheckTopicConfigChange checks the rules that tie several topic keys
// together, on the configuration a topic whose overrides were previous
// would have with these overrides and cluster-wide broker values, as Kafka's
// LogConfig does. On every topic, min.compaction.lag.ms may not exceed
// max.compaction.lag.ms (in Kafka's words). A topic may have
// remote.storage.enable=true only with remoteStorage (the checking node has
// remote storage, Kafka's remote.log.storage.system.enable); it may then not
// be compacted, local retention (local.retention.ms / .bytes, -2 meaning the
// total) may neither be unbounded under a bounded total nor exceed it, a
// positive remote.copy.lag.ms / .bytes may not exceed a bounded local
// retention, and with
// remote.log.copy.disable=true it must be the total. A topic that had
// remote.storage.enable=true turns it off only with
// remote.log.delete.on.disable=true (KIP-950: its remote part is deleted).
func CheckTopicConfigChange(previous, overrides, clusterDefaults map[string]string, remoteStorage bool) error {
	c := resolveTopicConfig(overrides, clusterDefaults)
	if c.MinCompactionLagMs > c.MaxCompactionLagMs {
		return KafkaText(ErrInvalidConfig, "conflict topic config setting min.compaction.lag.ms (%d) > max.compaction.lag.ms (%d)",
			c.MinCompactionLagMs, c.MaxCompactionLagMs)
	}
	if !c.RemoteStorageEnable {
		if resolveTopicConfig(previous, clusterDefaults).RemoteStorageEnable && !c.RemoteLogDeleteOnDisable {
			return KafkaText(ErrInvalidConfig, "It is invalid to disable remote storage without deleting remote data. "+
				"If you want to keep the remote data and turn to read only, please set `remote.storage.enable=true,remote.log.copy.disable=true`. "+
				"If you want to disable remote storage and delete all remote data, please set `remote.storage.enable=false,remote.log.delete.on.disable=true`.")
		}
		return nil
	}
	if !remoteStorage {
		return KafkaText(ErrInvalidConfig, "Tiered Storage functionality is disabled in the broker. "+
			"Topic cannot be configured with remote log storage.")
	}
	if c.CleanupPolicy&CleanupCompact != 0 {
		return fmt.Errorf("%w: remote log storage is unsupported for compacted topics (remote.storage.enable=true with cleanup.policy %q)", ErrInvalidConfig, "compact")
	}
	for _, r := range []struct {
		key, totalKey, lagKey string
		local, total, copyLag int64
	}{
		{"local.retention.ms", "retention.ms", "remote.copy.lag.ms", c.LocalRetentionMs, c.RetentionMs, c.RemoteCopyLagMs},
		{"local.retention.bytes", "retention.bytes", "remote.copy.lag.bytes", c.LocalRetentionBytes, c.RetentionBytes, c.RemoteCopyLagBytes},
	} {
		switch {
		case r.local == -2 || r.total < 0: // unbounded (retention.bytes may be any negative)
		case r.local == -1:
			return fmt.Errorf("%w: %s must not be -1 as retention is bounded (%d)", ErrInvalidConfig, r.key, r.total)
		case r.local > r.total:
			return fmt.Errorf("%w: %s %d must not be more than the total retention %d", ErrInvalidConfig, r.key, r.local, r.total)
		}
		if eff := effectiveLocal(r.local, r.total); r.copyLag > 0 && eff >= 0 && r.copyLag > eff {
			return fmt.Errorf("%w: %s %d must not exceed %s (effective value %d)", ErrInvalidConfig, r.lagKey, r.copyLag, r.key, eff)
		}
		if c.RemoteLogCopyDisable && r.local != -2 && r.local != r.total {
			return KafkaText(ErrInvalidConfig, "When `remote.log.copy.disable` is set to true, the `%s` and `%s` must be set to "+
				"the identical value because there will be no more logs copied to the remote storage.", r.key, r.totalKey)
		}
	}
	return nil
}

// effectiveLocal is a local retention with -2 resolved to the total.
func effectiveLocal(local, total int64) int64 {
	if local == -2 {
		return total
	}
	return local
}

// LocalRetention returns the retention a tiered topic's local log keeps
// (local.retention.ms and local.retention.bytes with -2 resolved to the totals;
// -1 is unbounded).
func (c TopicConfig) LocalRetention() (ms, bytes int64) {
	ms, bytes = c.LocalRetentionMs, c.LocalRetentionBytes
	if ms == -2 {
		ms = c.RetentionMs
	}
	if bytes == -2 {
		bytes = c.RetentionBytes
	}
	return ms, bytes
}

// RemoteCopyLag returns how long and for how many newer bytes a tiered
// topic's closed segments wait before upload (remote.copy.lag.ms and
// remote.copy.lag.bytes, -1 resolved to the local retention as Kafka 4.4's
// LogConfig does; 0 is at once, a negative result never).
func (c TopicConfig) RemoteCopyLag() (ms, bytes int64) {
	localMs, localBytes := c.LocalRetention()
	ms, bytes = c.RemoteCopyLagMs, c.RemoteCopyLagBytes
	if ms == -1 {
		ms = localMs
	}
	if bytes == -1 {
		bytes = localBytes
	}
	return ms, bytes
}
