package handlers

// Answers for a topic of a group offset request that fails as a whole: every
// partition it names gets one error code (a topic id no topic has, a topic the
// principal may not touch, a request refused outright). Each answer keeps the
// topic's name and id as the request gave them; a version puts one of the two
// on the wire, and resolveTopicIDs gives the answers of known topics their
// ids (topic_ids.go).

import "github.com/twmb/franz-go/pkg/kmsg"

func offsetCommitTopicError(t *kmsg.OffsetCommitRequestTopic, code int16) kmsg.OffsetCommitResponseTopic {
	rt := kmsg.NewOffsetCommitResponseTopic()
	rt.Topic, rt.TopicID = t.Topic, t.TopicID
	for _, p := range t.Partitions {
		rp := kmsg.NewOffsetCommitResponseTopicPartition()
		rp.Partition, rp.ErrorCode = p.Partition, code
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

func txnOffsetCommitTopicError(t *kmsg.TxnOffsetCommitRequestTopic, code int16) kmsg.TxnOffsetCommitResponseTopic {
	rt := kmsg.NewTxnOffsetCommitResponseTopic()
	rt.Topic, rt.TopicID = t.Topic, t.TopicID
	for _, p := range t.Partitions {
		rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
		rp.Partition, rp.ErrorCode = p.Partition, code
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

// offsetFetchTopicError answers each partition with no offset (-1, leader
// epoch -1, empty metadata) and code.
func offsetFetchTopicError(t *kmsg.OffsetFetchRequestGroupTopic, code int16) kmsg.OffsetFetchResponseGroupTopic {
	rt := kmsg.NewOffsetFetchResponseGroupTopic()
	rt.Topic, rt.TopicID = t.Topic, t.TopicID
	for _, p := range t.Partitions {
		rp := kmsg.NewOffsetFetchResponseGroupTopicPartition() // leader epoch -1
		rp.Partition, rp.Offset, rp.Metadata, rp.ErrorCode = p, -1, ptr(""), code
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

func offsetDeleteTopicError(t *kmsg.OffsetDeleteRequestTopic, code int16) kmsg.OffsetDeleteResponseTopic {
	rt := kmsg.NewOffsetDeleteResponseTopic()
	rt.Topic = t.Topic
	for _, p := range t.Partitions {
		rp := kmsg.NewOffsetDeleteResponseTopicPartition()
		rp.Partition, rp.ErrorCode = p.Partition, code
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}
