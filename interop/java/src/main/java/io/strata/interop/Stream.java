package io.strata.interop;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;

/**
 * Stream mode, for failover tests: one thread produces keyed records at a steady rate
 * (idempotent, acks=all) for a while, and meanwhile the main thread reads the topic as a
 * member of a consumer group ({@link GroupReader}, commit failures tolerated, so records may
 * be read again after a rebalance). Once the producer has flushed, reading goes on until
 * every acknowledged record was read or the deadline passes; the summary lists every
 * acknowledged send, every failed one, and every read, and is printed either way, so a
 * checker can name what went missing.
 */
final class Stream {
    private Stream() {}

    static void run(Client.Options o, long deadline, Summary s) throws Exception {
        int max = (int) Math.min(Integer.MAX_VALUE - 1, o.durationMs * o.rate / 1000 + 1);
        AtomicReferenceArray<ProducerRecord<byte[], byte[]>> sent = new AtomicReferenceArray<>(max);
        AtomicReferenceArray<Object> results = new AtomicReferenceArray<>(max); // RecordMetadata or Exception
        AtomicInteger count = new AtomicInteger();
        AtomicLong produceMs = new AtomicLong();

        long start = System.nanoTime();
        try (GroupReader reader = new GroupReader(o, true)) {
            Thread producer = new Thread(() -> produce(o, sent, results, count, produceMs), "interop-stream-producer");
            producer.start();

            Set<String> read = new HashSet<>();
            Set<String> unread = null; // acknowledged and not read yet, once the producer is done
            while (true) {
                for (ConsumerRecord<byte[], byte[]> r : reader.poll()) {
                    String at = r.partition() + "/" + r.offset();
                    read.add(at);
                    if (unread != null) {
                        unread.remove(at);
                    }
                }
                if (unread == null && !producer.isAlive()) {
                    unread = new HashSet<>();
                    for (int i = 0; i < count.get(); i++) {
                        if (results.get(i) instanceof RecordMetadata md) {
                            unread.add(md.partition() + "/" + md.offset());
                        }
                    }
                    unread.removeAll(read);
                }
                if (unread != null && unread.isEmpty()) {
                    break;
                }
                if (System.nanoTime() > deadline) {
                    System.err.println("java client: deadline passed; producer "
                            + (producer.isAlive() ? "still running" : "done") + ", "
                            + (unread == null ? "?" : unread.size()) + " acknowledged records unread");
                    break;
                }
            }
            s.field("produce_ms", produceMs.get());
            s.field("consume_ms", (System.nanoTime() - start) / 1_000_000);

            List<Summary.Produced> acked = new ArrayList<>();
            List<Summary.Failed> failed = new ArrayList<>();
            for (int i = 0; i < count.get(); i++) {
                ProducerRecord<byte[], byte[]> rec = sent.get(i);
                Object res = results.get(i);
                if (res instanceof RecordMetadata md) {
                    acked.add(new Summary.Produced(rec.key(), rec.value(), rec.headers(), md));
                } else {
                    String why = res == null ? "no acknowledgement by the deadline" : res.toString();
                    failed.add(new Summary.Failed(rec.key(), rec.value(), rec.headers(), why));
                }
            }
            s.produced(acked);
            s.failed(failed);
            s.consumed(reader.records());
            s.group(o.group, reader.assignments());
        }
    }

    /** Sends o.rate records a second for o.durationMs, then flushes; records each outcome. */
    private static void produce(Client.Options o, AtomicReferenceArray<ProducerRecord<byte[], byte[]>> sent,
            AtomicReferenceArray<Object> results, AtomicInteger count, AtomicLong produceMs) {
        Properties p = Client.producerProps(o, "strata-interop-" + o.name + "-stream");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        long period = 1_000_000_000L / o.rate;
        long start = System.nanoTime();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < sent.length(); i++) {
                long at = start + i * period;
                if (at - start >= o.durationMs * 1_000_000L) {
                    break;
                }
                long wait = at - System.nanoTime();
                if (wait > 0) {
                    Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                }
                byte[] key = Client.utf8(String.format("key-%02d", i % o.keys));
                byte[] value = Client.utf8(String.format("%s-%06d", o.name, i));
                ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(o.topic, null, key, value, Client.headers(o.name, i));
                sent.set(i, rec);
                count.set(i + 1);
                final int slot = i;
                try {
                    producer.send(rec, (md, err) -> results.set(slot, err != null ? err : md));
                } catch (KafkaException e) {
                    results.set(slot, e);
                }
            }
            producer.flush();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        produceMs.set((System.nanoTime() - start) / 1_000_000);
    }
}
