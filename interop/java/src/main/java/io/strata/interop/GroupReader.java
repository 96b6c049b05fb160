package io.strata.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.OffsetSpec;

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
 * the classic group protocol (or KIP-848's with {@code --group-protocol consumer}),
 * {@code subscribe()}, automatic commits off, and
 * {@code commitSync()} once the records of each poll are processed (here: recorded), so a
 * member that loses a partition has committed everything it read.
 *
 * <p>An admin client beside the consumer asks for end offsets and the group's committed
 * offsets: on the consumer's own connections those requests would wait behind its
 * long-polling fetches, and end offsets of partitions it does not own make it warn.
 *
 * <p>Not thread-safe: one thread polls, like the KafkaConsumer inside.
 */
final class GroupReader implements AutoCloseable {
    private static final Duration POLL = Duration.ofMillis(200);

    private final KafkaConsumer<byte[], byte[]> consumer;
    private final Admin admin;
    private final String group;
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
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, o.groupProtocol);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        this.consumer = new KafkaConsumer<>(p);
        Properties a = new Properties();
        a.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, o.bootstrap);
        a.put(AdminClientConfig.CLIENT_ID_CONFIG, "strata-interop-" + o.name + "-group-watcher");
        this.admin = Admin.create(a);
        this.group = o.group;
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
    private String behind(long minRecords, long deadline) throws Exception {
        if (assignments.isEmpty()) {
            return "waiting for a first assignment";
        }
        if (partitions.isEmpty()) {
            for (PartitionInfo info : consumer.partitionsFor(topic(), Client.remaining(deadline))) {
                partitions.add(new TopicPartition(info.topic(), info.partition()));
            }
        }
        Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
        for (TopicPartition tp : partitions) {
            latest.put(tp, OffsetSpec.latest());
        }
        Map<TopicPartition, Long> end = new HashMap<>();
        long total = 0;
        for (var e : admin.listOffsets(latest).all().get(remainingNanos(deadline), TimeUnit.NANOSECONDS).entrySet()) {
            end.put(e.getKey(), e.getValue().offset());
            total += e.getValue().offset();
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
        Map<TopicPartition, OffsetAndMetadata> committed = admin.listConsumerGroupOffsets(group)
                .partitionsToOffsetAndMetadata().get(remainingNanos(deadline), TimeUnit.NANOSECONDS);
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

    private static long remainingNanos(long deadline) {
        return Math.max(1, deadline - System.nanoTime());
    }

    /** Leaves the group. */
    @Override
    public void close() {
        consumer.close();
        admin.close();
    }
}
