package io.strata.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.RetriableException;

/**
 * A member of a consumer group reading one topic the way applications are told to:
 * classic group protocol, {@code subscribe()}, automatic commits off, and
 * {@code commitSync()} once the records of each poll are processed (here: recorded), so a
 * member that loses a partition has committed everything it read.
 *
 * <p>Not thread-safe: one thread polls, like the KafkaConsumer inside.
 */
final class GroupReader implements AutoCloseable {
    private static final Duration POLL = Duration.ofMillis(200);

    private final KafkaConsumer<byte[], byte[]> consumer;
    private final boolean tolerateCommitFailures;
    private final List<TopicPartition> partitions = new ArrayList<>();
    private final List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
    private final List<List<Integer>> assignments = new ArrayList<>();

    /**
     * Joins group {@code o.group} for {@code o.topic}. With tolerateCommitFailures, a
     * commit lost to a rebalance or a coordinator failover is reported on stderr and
     * reading goes on (its records come again: at-least-once); without, it is an error.
     */
    GroupReader(Client.Options o, boolean tolerateCommitFailures) {
        Properties p = Client.consumerProps(o, "strata-interop-" + o.name + "-group");
        p.put(ConsumerConfig.GROUP_ID_CONFIG, o.group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        this.consumer = new KafkaConsumer<>(p);
        this.tolerateCommitFailures = tolerateCommitFailures;
        consumer.subscribe(List.of(o.topic), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> revoked) {
                // Nothing uncommitted: every poll's records were committed before the next poll.
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> added) {
                List<Integer> now = new ArrayList<>();
                for (TopicPartition tp : consumer.assignment()) {
                    now.add(tp.partition());
                }
                now.sort(null);
                assignments.add(now);
            }
        });
    }

    /** Every record read so far, in read order. */
    List<ConsumerRecord<byte[], byte[]>> records() {
        return records;
    }

    /** The member's assignment after each rebalance, partitions sorted. */
    List<List<Integer>> assignments() {
        return assignments;
    }

    /** Polls once, records what came, commits it, and returns it. */
    List<ConsumerRecord<byte[], byte[]>> poll() {
        ConsumerRecords<byte[], byte[]> got = consumer.poll(POLL);
        List<ConsumerRecord<byte[], byte[]>> batch = new ArrayList<>(got.count());
        for (ConsumerRecord<byte[], byte[]> r : got) {
            batch.add(r);
        }
        records.addAll(batch);
        if (!batch.isEmpty()) {
            try {
                consumer.commitSync();
            } catch (CommitFailedException | RebalanceInProgressException | RetriableException e) {
                if (!tolerateCommitFailures) {
                    throw e;
                }
                System.err.println("java client: commit after " + batch.size() + " records failed, they will be read again: " + e);
            }
        }
        return batch;
    }

    /**
     * Polls until the topic holds at least minRecords records and this member is caught
     * up: it has joined, its position on each partition it owns is at the end offset, and
     * the group has committed the end offset of every partition (other members' too).
     */
    void readUntilCaughtUp(long minRecords, long deadline) throws Exception {
        while (true) {
            poll();
            String behind = behind(minRecords, deadline);
            if (behind == null) {
                return;
            }
            if (System.nanoTime() > deadline) {
                throw new Exception("deadline passed, still " + behind + "; read " + records.size()
                        + " records, assignments " + assignments);
            }
        }
    }

    /** Says why this member is not caught up yet, or returns null. */
    private String behind(long minRecords, long deadline) {
        if (assignments.isEmpty()) {
            return "waiting for a first assignment";
        }
        if (partitions.isEmpty()) {
            for (PartitionInfo info : consumer.partitionsFor(topic(), Client.remaining(deadline))) {
                partitions.add(new TopicPartition(info.topic(), info.partition()));
            }
        }
        Map<TopicPartition, Long> end = consumer.endOffsets(partitions, Client.remaining(deadline));
        long total = 0;
        for (long e : end.values()) {
            total += e;
        }
        if (total < minRecords) {
            return "the topic holds " + total + " of " + minRecords + " records";
        }
        for (TopicPartition tp : consumer.assignment()) {
            long pos = consumer.position(tp, Client.remaining(deadline));
            if (pos < end.get(tp)) {
                return "at " + tp + " position " + pos + " < end " + end.get(tp);
            }
        }
        Set<TopicPartition> all = new HashSet<>(partitions);
        Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(all, Client.remaining(deadline));
        for (TopicPartition tp : partitions) {
            OffsetAndMetadata c = committed.get(tp);
            if (c == null || c.offset() < end.get(tp)) {
                return "group committed " + (c == null ? "nothing" : c.offset()) + " at " + tp + " < end " + end.get(tp);
            }
        }
        return null;
    }

    private String topic() {
        return consumer.subscription().iterator().next();
    }

    /** Leaves the group. */
    @Override
    public void close() {
        consumer.close();
    }
}
