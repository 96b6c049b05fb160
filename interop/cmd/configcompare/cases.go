package main

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config resource types.
const (
	topic         = 2
	broker        = 4
	brokerLogger  = 8
	clientMetrics = 16
	group         = 32
)

type step struct {
	name string
	req  func(s *system) kmsg.Request
	// settle waits a moment after the request, for changes later steps read.
	settle bool
	// namesOnly prints only the names of the configs described, sorted.
	namesOnly bool
	// v0 sends the request at version 0 (ListConfigResources: the former
	// ListClientMetricsResources).
	v0 bool
}

var cases = []step{
	// DescribeConfigs: fields, synonyms and documentation.
	{name: "describe topic keys with synonyms and docs", req: describe(topic, "T", true, true,
		"cleanup.policy", "segment.bytes", "remote.storage.enable", "min.insync.replicas", "max.message.bytes", "retention.ms")},
	{name: "describe topic keys without synonyms", req: describe(topic, "T", false, false, "cleanup.policy", "segment.bytes")},
	{name: "describe broker keys with synonyms and docs", req: describe(broker, "1", true, true,
		"log.cleanup.policy", "log.segment.bytes", "log.retention.ms", "min.insync.replicas", "message.max.bytes",
		"leader.replication.throttled.rate", "log.dirs", "node.id")},
	{name: "describe default broker keys with synonyms", req: describe(broker, "", true, true,
		"log.cleanup.policy", "log.retention.ms", "leader.replication.throttled.rate")},
	{name: "set cluster log.retention.ms", req: incr(broker, "", 0, "log.retention.ms", "86400000"), settle: true},
	{name: "set broker 1 log.retention.ms", req: incr(broker, "1", 0, "log.retention.ms", "43200000"), settle: true},
	{name: "set topic retention.ms", req: incr(topic, "T", 0, "retention.ms", "3600000"), settle: true},
	{name: "describe topic retention.ms at every level", req: describe(topic, "T", true, true, "retention.ms")},
	{name: "describe broker 1 log.retention.ms at every level", req: describe(broker, "1", true, true, "log.retention.ms")},
	{name: "describe default broker log.retention.ms", req: describe(broker, "", true, true, "log.retention.ms")},
	{name: "delete broker 1 log.retention.ms", req: incr(broker, "1", 1, "log.retention.ms", ""), settle: true},
	{name: "delete cluster log.retention.ms", req: incr(broker, "", 1, "log.retention.ms", ""), settle: true},

	// Broker keys: unknown, read-only, another broker.
	{name: "incremental set unknown broker key on broker 1", req: incr(broker, "1", 0, "foo.bar.baz", "1")},
	{name: "incremental set unknown broker key cluster-wide", req: incr(broker, "", 0, "foo.bar.baz", "1")},
	{name: "alter unknown broker key on broker 1", req: alter(broker, "1", "foo.bar.baz", "1")},
	{name: "alter unknown broker key cluster-wide", req: alter(broker, "", "foo.bar.baz", "1")},
	{name: "incremental set log.dirs on broker 1", req: incr(broker, "1", 0, "log.dirs", "/x")},
	{name: "incremental set log.dirs cluster-wide", req: incr(broker, "", 0, "log.dirs", "/x")},
	{name: "incremental set node.id on broker 1", req: incr(broker, "1", 0, "node.id", "3")},
	{name: "incremental set num.io.threads on broker 1", req: incr(broker, "1", 0, "num.io.threads", "4")},
	{name: "incremental set log.cleaner.threads cluster-wide", req: incr(broker, "", 0, "log.cleaner.threads", "2")},
	{name: "incremental set bad log.retention.ms on broker 1", req: incr(broker, "1", 0, "log.retention.ms", "x")},
	{name: "incremental set on broker 2", req: incr(broker, "2", 0, "log.retention.ms", "1000")},
	{name: "alter on broker 2", req: alter(broker, "2", "log.retention.ms", "1000")},
	{name: "describe broker 2", req: describe(broker, "2", false, false, "log.retention.ms")},
	{name: "incremental unknown operation", req: incr(topic, "T", 7, "retention.ms", "1")},
	{name: "incremental delete unknown broker key", req: incr(broker, "1", 1, "foo.bar.baz", "")},

	// segment.bytes and its internal key.
	{name: "create topic segment.bytes 1048575", req: createTopic("s1-", 1, true, "segment.bytes", "1048575")},
	{name: "create topic segment.bytes 1048576", req: createTopic("s2-", 1, true, "segment.bytes", "1048576")},
	{name: "create topic internal.segment.bytes 1024", req: createTopic("s3-", 1, true, "internal.segment.bytes", "1024")},
	{name: "create topic internal.segment.bytes 13", req: createTopic("s4-", 1, true, "internal.segment.bytes", "13")},
	{name: "create topic internal.segment.bytes 14", req: createTopic("s5-", 1, true, "internal.segment.bytes", "14")},
	{name: "create topic internal.segment.bytes 0", req: createTopic("s6-", 1, true, "internal.segment.bytes", "0")},
	{name: "create topic internal.segment.bytes -1", req: createTopic("s7-", 1, true, "internal.segment.bytes", "-1")},
	{name: "describe internal.segment.bytes unset", req: describe(topic, "T", true, true, "internal.segment.bytes")},
	{name: "describe every topic key, names", req: describe(topic, "T", false, false), namesOnly: true},
	{name: "describe every broker key, names", req: describe(broker, "1", false, false), namesOnly: true},
	{name: "describe every default broker key, names", req: describe(broker, "", false, false), namesOnly: true},
	{name: "set segment.bytes 1000", req: incr(topic, "T", 0, "segment.bytes", "1000")},
	{name: "set internal.segment.bytes 1000", req: incr(topic, "T", 0, "internal.segment.bytes", "1000"), settle: true},
	{name: "describe internal.segment.bytes", req: describe(topic, "T", true, false, "internal.segment.bytes", "segment.bytes")},
	{name: "set cluster log.segment.bytes 1000", req: incr(broker, "", 0, "log.segment.bytes", "1000")},
	{name: "set cluster internal.segment.bytes 1000", req: incr(broker, "", 0, "internal.segment.bytes", "1000")},

	// CreatePartitions and CreateTopics over the limits (validate only).
	{name: "create partitions +10000", req: createPartitions("T", 10001, true)},
	{name: "create partitions +10001", req: createPartitions("T", 10002, true)},
	{name: "create partitions to 70000", req: createPartitions("T", 70000, true)},
	{name: "create topic 10000 partitions", req: createTopic("p1-", 10000, true)},
	{name: "create topic 10001 partitions", req: createTopic("p2-", 10001, true)},
	{name: "create topic 70000 partitions", req: createTopic("p3-", 70000, true)},

	{name: "create topics 6000 + 6000 + 1 partitions", req: createTopics([]string{"q1-", "q2-", "q3-"}, []int32{6000, 6000, 1})},
	{name: "create topics 9999 + 1 + 1 partitions", req: createTopics([]string{"q4-", "q5-", "q6-"}, []int32{9999, 1, 1})},
	{name: "create partitions +6000 on two topics", req: createPartitionsOf([]string{"T", "o-"}, []int32{6001, 6001})},

	// Groups.
	{name: "set group consumer.session.timeout.ms", req: incr(group, "g-", 0, "consumer.session.timeout.ms", "50000"), settle: true},
	{name: "set group consumer.session.timeout.ms too low", req: incr(group, "g-", 0, "consumer.session.timeout.ms", "10")},
	{name: "set group consumer.heartbeat.interval.ms", req: incr(group, "g-", 0, "consumer.heartbeat.interval.ms", "6000")},
	{name: "set group consumer.session.timeout.ms too high", req: incr(group, "g-", 0, "consumer.session.timeout.ms", "60001")},
	{name: "set group consumer.heartbeat.interval.ms too low", req: incr(group, "g-", 0, "consumer.heartbeat.interval.ms", "4999")},
	{name: "set group consumer.heartbeat.interval.ms too high", req: incr(group, "g-", 0, "consumer.heartbeat.interval.ms", "15001")},
	{name: "set group unknown key", req: incr(group, "g-", 0, "foo.bar", "1")},
	{name: "describe group", req: describe(group, "g-", true, true, "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms", "share.record.lock.duration.ms")},

	// BROKER_LOGGER and CLIENT_METRICS.
	{name: "describe broker logger 1 root", req: describe(brokerLogger, "1", false, false, "root")},
	{name: "describe broker logger 2", req: describe(brokerLogger, "2", false, false)},
	{name: "set broker logger 1 root DEBUG", req: incr(brokerLogger, "1", 0, "root", "DEBUG")},
	{name: "set broker logger 1 root BAD", req: incr(brokerLogger, "1", 0, "root", "BAD")},
	{name: "delete broker logger 1 root", req: incr(brokerLogger, "1", 1, "root", "")},
	{name: "set broker logger 1 unknown logger", req: incr(brokerLogger, "1", 0, "no.such.logger", "DEBUG")},
	{name: "set broker logger 1 root INFO", req: incr(brokerLogger, "1", 0, "root", "INFO")},
	{name: "alter broker logger 1", req: alter(brokerLogger, "1", "root", "INFO")},
	{name: "describe client metrics m", req: describe(clientMetrics, "m-", true, true)},
	{name: "set client metrics m", req: incr(clientMetrics, "m-", 0, "interval.ms", "60000"), settle: true},
	{name: "describe client metrics m after set", req: describe(clientMetrics, "m-", true, true, "interval.ms", "metrics")},
	{name: "set client metrics bad key", req: incr(clientMetrics, "m-", 0, "foo", "1")},
	{name: "set client metrics interval too low", req: incr(clientMetrics, "m-", 0, "interval.ms", "99")},
	{name: "set client metrics interval too high", req: incr(clientMetrics, "m-", 0, "interval.ms", "3600001")},
	{name: "set client metrics interval not a number", req: incr(clientMetrics, "m-", 0, "interval.ms", "x")},
	{name: "set client metrics match unknown selector", req: incr(clientMetrics, "m-", 0, "match", "foo=bar")},
	{name: "set client metrics match without =", req: incr(clientMetrics, "m-", 0, "match", "client_id")},
	{name: "set client metrics match bad regex", req: incr(clientMetrics, "m-", 0, "match", "client_id=[")},
	{name: "set client metrics empty name", req: incr(clientMetrics, "", 0, "interval.ms", "1000")},
	{name: "describe client metrics empty name", req: describe(clientMetrics, "", false, false)},
	{name: "describe client metrics unknown", req: describe(clientMetrics, "nx-", false, false)},
	{name: "set client metrics match", req: incr(clientMetrics, "m-", 0, "match", "client_id=abc.*,client_software_name=apache-kafka-java"), settle: true},
	{name: "append client metrics metrics", req: incr(clientMetrics, "m-", 2, "metrics", "org.apache.kafka.producer."), settle: true},
	{name: "describe client metrics m after match", req: describe(clientMetrics, "m-", true, true)},
	{name: "alter client metrics n", req: alter(clientMetrics, "n-", "metrics", "*", "interval.ms", "1000"), settle: true},
	{name: "alter client metrics bad interval", req: alter(clientMetrics, "n-", "interval.ms", "1")},
	{name: "describe client metrics n", req: describe(clientMetrics, "n-", false, false)},
	{name: "list config resources", req: listConfigResources()},
	{name: "list config resources v0", req: listConfigResources(), v0: true},
	{name: "list config resources client metrics", req: listConfigResources(clientMetrics)},
	{name: "list config resources topics", req: listConfigResources(topic)},
	{name: "list config resources brokers", req: listConfigResources(broker)},
	{name: "list config resources broker loggers", req: listConfigResources(brokerLogger)},
	{name: "list config resources groups", req: listConfigResources(group)},
	{name: "list config resources groups and client metrics", req: listConfigResources(group, clientMetrics)},
	{name: "list config resources unknown type", req: listConfigResources(1)},
	{name: "list config resources unknown and known type", req: listConfigResources(clientMetrics, 64)},
	{name: "delete client metrics n", req: alter(clientMetrics, "n-"), settle: true},
	{name: "list config resources after delete", req: listConfigResources(clientMetrics)},
}

func listConfigResources(types ...int8) func(s *system) kmsg.Request {
	return func(*system) kmsg.Request {
		req := kmsg.NewPtrListConfigResourcesRequest()
		req.ResourceTypes = types
		return req
	}
}

func describe(rt int8, name string, synonyms, docs bool, keys ...string) func(s *system) kmsg.Request {
	return func(s *system) kmsg.Request {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.IncludeSynonyms, req.IncludeDocumentation = synonyms, docs
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceType(rt), s.name(name)
		r.ConfigNames = keys
		req.Resources = append(req.Resources, r)
		return req
	}
}

func incr(rt int8, name string, op int8, key, value string) func(s *system) kmsg.Request {
	return func(s *system) kmsg.Request {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceType(rt), s.name(name)
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op = key, kmsg.IncrementalAlterConfigOp(op)
		if op != 1 {
			c.Value = kmsg.StringPtr(value)
		}
		r.Configs = append(r.Configs, c)
		req.Resources = append(req.Resources, r)
		return req
	}
}

func alter(rt int8, name string, kv ...string) func(s *system) kmsg.Request {
	return func(s *system) kmsg.Request {
		req := kmsg.NewPtrAlterConfigsRequest()
		r := kmsg.NewAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceType(rt), s.name(name)
		for i := 0; i < len(kv); i += 2 {
			c := kmsg.NewAlterConfigsRequestResourceConfig()
			c.Name, c.Value = kv[i], kmsg.StringPtr(kv[i+1])
			r.Configs = append(r.Configs, c)
		}
		req.Resources = append(req.Resources, r)
		return req
	}
}

func createTopic(name string, partitions int32, validateOnly bool, kv ...string) func(s *system) kmsg.Request {
	return func(s *system) kmsg.Request {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.ValidateOnly, req.TimeoutMillis = validateOnly, 30000
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = s.name(name), partitions, 1
		for i := 0; i < len(kv); i += 2 {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = kv[i], kmsg.StringPtr(kv[i+1])
			t.Configs = append(t.Configs, c)
		}
		req.Topics = append(req.Topics, t)
		return req
	}
}

func createPartitions(name string, count int32, validateOnly bool) func(s *system) kmsg.Request {
	return func(s *system) kmsg.Request {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.ValidateOnly, req.TimeoutMillis = validateOnly, 30000
		t := kmsg.NewCreatePartitionsRequestTopic()
		t.Topic, t.Count = s.name(name), count
		req.Topics = append(req.Topics, t)
		return req
	}
}

// createTopics validates topics of the given partition counts in one request.
func createTopics(names []string, partitions []int32) func(s *system) kmsg.Request {
	return func(s *system) kmsg.Request {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.ValidateOnly, req.TimeoutMillis = true, 30000
		for i, n := range names {
			t := kmsg.NewCreateTopicsRequestTopic()
			t.Topic, t.NumPartitions, t.ReplicationFactor = s.name(n), partitions[i], 1
			req.Topics = append(req.Topics, t)
		}
		return req
	}
}

// createPartitionsOf validates new partition counts of topics in one request.
func createPartitionsOf(names []string, counts []int32) func(s *system) kmsg.Request {
	return func(s *system) kmsg.Request {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.ValidateOnly, req.TimeoutMillis = true, 30000
		for i, n := range names {
			t := kmsg.NewCreatePartitionsRequestTopic()
			t.Topic, t.Count = s.name(n), counts[i]
			req.Topics = append(req.Topics, t)
		}
		return req
	}
}
