package io.strata.interop;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A member of a share group (KIP-932, {@link KafkaShareConsumer}) with explicit
 * acknowledgement, deciding per record as the interop share test expects:
 * <ul>
 *   <li>REJECT a record whose key is {@code --reject-key};
 *   <li>RELEASE, on its first delivery, a record whose value ends in a number with
 *       {@code n % 10 == 3}, so it comes back with delivery count 2;
 *   <li>ACCEPT everything else.
 * </ul>
 * Acknowledgements are committed with {@code commitSync()} after each poll; each delivery
 * is reported with the outcome of its commit ("accept", "release", "reject", or
 * "failed:..." when the broker refused it or no broker answered for its partition). The member stops when it has seen nothing
 * for {@code --idle-ms} after its first record, or at the deadline. {@code --max-poll}
 * sets max.poll.records; {@code --process-ms} pauses that long per poll before
 * acknowledging, as slow processing would.
 */
final class ShareReader implements AutoCloseable {
    private static final Duration POLL = Duration.ofMillis(200);

    /** One delivery and what became of it. */
    record Delivery(ConsumerRecord<byte[], byte[]> record, short count, String ack) {}

    private final KafkaShareConsumer<byte[], byte[]> consumer;
    private final String rejectKey;
    private final long processMs;
    private final List<Delivery> deliveries = new ArrayList<>();

    ShareReader(Client.Options o) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, o.bootstrap);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "strata-interop-" + o.name + "-share");
        p.put(ConsumerConfig.GROUP_ID_CONFIG, o.group);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put("share.acknowledgement.mode", "explicit");
        if (o.maxPoll > 0) {
            p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, Integer.toString(o.maxPoll));
        }
        this.consumer = new KafkaShareConsumer<>(p);
        this.rejectKey = o.rejectKey;
        this.processMs = o.processMs;
        consumer.subscribe(List.of(o.topic));
    }

    List<Delivery> deliveries() {
        return deliveries;
    }

    void run(long idleMs, long deadline) {
        long lastRecord = -1;
        while (System.nanoTime() < deadline) {
            ConsumerRecords<byte[], byte[]> got = consumer.poll(POLL);
            if (got.isEmpty()) {
                if (lastRecord > 0 && System.nanoTime() - lastRecord > idleMs * 1_000_000L) {
                    return;
                }
                continue;
            }
            if (processMs > 0) {
                try {
                    Thread.sleep(processMs); // "processing", so records stay acquired a while
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
            lastRecord = System.nanoTime();
            Map<ConsumerRecord<byte[], byte[]>, AcknowledgeType> acks = new HashMap<>();
            List<ConsumerRecord<byte[], byte[]>> order = new ArrayList<>();
            for (ConsumerRecord<byte[], byte[]> r : got) {
                AcknowledgeType t = decide(r);
                consumer.acknowledge(r, t);
                acks.put(r, t);
                order.add(r);
            }
            Map<TopicIdPartition, Optional<KafkaException>> result = consumer.commitSync();
            for (ConsumerRecord<byte[], byte[]> r : order) {
                // A partition missing from the result had its acknowledgements
                // never answered by a broker: kafka-clients 4.1 drops them without
                // an error when the node that led the partition has left the
                // metadata (a fenced broker), so they are not confirmed.
                String outcome = "failed:NotSent";
                for (var e : result.entrySet()) {
                    if (e.getKey().topic().equals(r.topic()) && e.getKey().partition() == r.partition()) {
                        outcome = e.getValue().isPresent()
                            ? "failed:" + e.getValue().get().getClass().getSimpleName()
                            : acks.get(r).name().toLowerCase();
                    }
                }
                deliveries.add(new Delivery(r, r.deliveryCount().orElse((short) 0), outcome));
            }
        }
    }

    private AcknowledgeType decide(ConsumerRecord<byte[], byte[]> r) {
        if (rejectKey != null && r.key() != null && rejectKey.equals(new String(r.key(), StandardCharsets.UTF_8))) {
            return AcknowledgeType.REJECT;
        }
        String v = new String(r.value(), StandardCharsets.UTF_8);
        int dash = v.lastIndexOf('-');
        int n = dash < 0 ? -1 : Integer.parseInt(v.substring(dash + 1));
        if (n % 10 == 3 && r.deliveryCount().orElse((short) 1) == 1) {
            return AcknowledgeType.RELEASE;
        }
        return AcknowledgeType.ACCEPT;
    }

    @Override
    public void close() {
        consumer.close();
    }
}
